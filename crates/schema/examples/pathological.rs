//! Times every accepted pathological case (compile once, validate each
//! instance) and fails if any single validation takes longer than the
//! budget. Run in release: `cargo run --release -p toolgate-schema --example pathological`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;

use std::time::{Duration, Instant};

use toolgate_schema::CompiledSchema;

const BUDGET: Duration = Duration::from_millis(50);

fn main() {
    let mut worst = Duration::ZERO;
    let mut over = Vec::new();
    for case in cases::all() {
        let started = Instant::now();
        let compiled = CompiledSchema::compile(&case.schema);
        let compile_time = started.elapsed();
        match (&compiled, case.refused_for) {
            (Err(e), Some(_)) => println!(
                "{:>9.3} ms  refused   {} ({e})",
                ms(compile_time),
                case.name
            ),
            (Ok(c), None) => {
                for (i, instance) in case.instances.iter().enumerate() {
                    let started = Instant::now();
                    let valid = c.validate(instance).is_ok();
                    let took = started.elapsed();
                    worst = worst.max(took);
                    println!(
                        "{:>9.3} ms  validate  {} #{i} (valid: {valid})",
                        ms(took),
                        case.name
                    );
                    if took > BUDGET {
                        over.push(format!("{} #{i}: {:.3} ms", case.name, ms(took)));
                    }
                }
            }
            (other, expected) => panic!(
                "{}: got {other:?}, expected refusal for {expected:?}",
                case.name
            ),
        }
    }
    println!(
        "slowest validation: {:.3} ms (budget {} ms)",
        ms(worst),
        BUDGET.as_millis()
    );
    if !over.is_empty() {
        eprintln!("over budget:\n{}", over.join("\n"));
        std::process::exit(1);
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
