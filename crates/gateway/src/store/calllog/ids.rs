//! Call ids for a call log: blocks reserved in the store.
//!
//! A call log names a call when it is begun, before the store holds it.
//! So that a writer of committed rows on the same store (another gateway
//! with `durability = "commit"`, `toolgate grants revoke`) never takes an
//! id the log has given, the log reserves its ids in the store
//! (table `call_ids`) and committed writers take ids
//! above every reservation.
//!
//! Ids are read as the calls' order (`toolgate log --follow` and the
//! console follow by id), so a block is short-lived: it is used for at most
//! [`FRESH_FOR`] after it was reserved, then the rest is left unused, and
//! its size follows the rate (what the last block's lifetime took, twice).
//! Rows of a log and of a committed writer are thus out of id order by at
//! most that long. While calls come, a thread of its own keeps a spare
//! block reserved no longer than half that ago, so a call waits for the
//! store only when there is none (the first call after a pause), and then
//! at most [`WAIT_ON_A_CALL`]. Ids rise; they are not consecutive (what a
//! block or a spare leaves unused is never given).
//!
//! The log keeps taking calls while the store cannot be written (that is
//! what it is for): a call that finds no block and cannot reserve one
//! takes the next id [`GAP`] above the last it gave, and the calls after it
//! the ids after that, until a block is reserved again (above them). A
//! writer of committed rows meanwhile takes ids just above the store's
//! rows, which it would take four billion rows to reach. After such a
//! spell, rows of other writers can follow a log's in time and precede
//! them in id.
//!
//! Layer: `store`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use rusqlite::Connection;

use crate::store::StoreError;

/// How long after its reservation a block's ids may still be given.
pub const FRESH_FOR: Duration = Duration::from_millis(100);

/// How long a call waits for the store's lock to reserve a block before it
/// takes an id above the gap instead.
pub const WAIT_ON_A_CALL: Duration = Duration::from_secs(1);

/// How far above the last id given a call takes its id while no block
/// can be reserved.
pub const GAP: i64 = 1 << 32;

/// How long after a failed reservation calls take ids above the gap
/// without trying the store themselves (the reserver keeps trying).
const DOWN_FOR: Duration = Duration::from_secs(5);

const SMALLEST: i64 = 16;
const LARGEST: i64 = 4096;

/// A reserved block: `next..end`, reserved at `at`.
#[derive(Clone, Copy, Debug)]
struct Block {
    next: i64,
    end: i64,
    at: Instant,
}

impl Block {
    fn fresh(&self, now: Instant) -> bool {
        now.duration_since(self.at) < FRESH_FOR
    }
}

struct State {
    current: Option<Block>,
    spare: Option<Block>,
    /// The size of the next block reserved.
    size: i64,
    /// The spare is wanted (the reserver's cue).
    wanted: bool,
    /// Calls came since the spare was reserved (it is kept fresh then).
    active: bool,
    /// The reserver waits for a cue with no deadline (no calls came).
    idle: bool,
    stopping: bool,
    /// Ids no reservation may go below: what the log held when opened.
    floor: i64,
    /// The last id given: a block reserved before another (a spare behind
    /// one reserved on a call) gives only ids above it, so ids only rise.
    last: i64,
    /// While no block can be reserved: where ids above the gap start, and
    /// until when calls do not try the store themselves.
    above_gap: Option<(i64, Instant)>,
}

struct Shared {
    state: Mutex<State>,
    cue: Condvar,
    /// The reserver's connection (it waits for the store's lock long).
    conn: Mutex<Connection>,
    /// A call's connection (it waits [`WAIT_ON_A_CALL`]).
    quick: Mutex<Connection>,
    shown: String,
}

/// The ids a call log gives.
pub struct Ids {
    shared: Arc<Shared>,
    reserver: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Ids {
    /// Give ids for the store at `path` (two connections of its own), never
    /// at or below `floor`.
    pub fn start(path: &Path, floor: i64) -> Result<Self, StoreError> {
        let conn = crate::store::sqlite::open_for_writing(path)?;
        let quick = crate::store::sqlite::open_for_writing(path)?;
        quick
            .busy_timeout(WAIT_ON_A_CALL)
            .map_err(|source| StoreError::Sqlite {
                context: format!("the audit store {}", path.display()),
                source,
            })?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                current: None,
                spare: None,
                size: SMALLEST,
                wanted: true,
                active: false,
                idle: false,
                stopping: false,
                floor,
                last: floor,
                above_gap: None,
            }),
            cue: Condvar::new(),
            conn: Mutex::new(conn),
            quick: Mutex::new(quick),
            shown: path.display().to_string(),
        });
        let reserving = shared.clone();
        let reserver = std::thread::Builder::new()
            .name("toolgate-call-ids".into())
            .spawn(move || reserve_spares(&reserving))
            .map_err(|e| StoreError::Other(format!("cannot start the call ids' thread: {e}")))?;
        Ok(Self {
            shared,
            reserver: Mutex::new(Some(reserver)),
        })
    }

    /// The next call's id: above every id given before.
    pub fn next(&self) -> i64 {
        let shared = &*self.shared;
        let now = Instant::now();
        let mut state = shared.state.lock();
        state.active = true;
        if state.idle {
            state.idle = false;
            shared.cue.notify_one();
        }
        loop {
            let last = state.last;
            if let Some(block) = state.current.as_mut() {
                block.next = block.next.max(last + 1);
                if block.next < block.end && block.fresh(now) {
                    let id = block.next;
                    block.next += 1;
                    state.last = id;
                    state.above_gap = None;
                    return id;
                }
            }
            // The block is used up (a busier rate: larger blocks) or stale
            // (a quieter one: smaller).
            if let Some(old) = state.current.take() {
                state.size = if old.next >= old.end {
                    (state.size * 2).min(LARGEST)
                } else {
                    (state.size / 2).max(SMALLEST)
                };
            }
            state.wanted = true;
            shared.cue.notify_one();
            match state.spare.take() {
                Some(spare) if spare.fresh(now) => state.current = Some(spare),
                _ => {
                    if let Some((from, until)) = state.above_gap
                        && now < until
                    {
                        let id = from.max(last + 1);
                        state.last = id;
                        return id;
                    }
                    // None ready: reserve one on this call, waiting a
                    // little for the store's lock.
                    let size = state.size;
                    drop(state);
                    let reserved = reserve(shared, &shared.quick, size);
                    state = shared.state.lock();
                    match reserved {
                        Ok(block) => state.current = Some(block),
                        Err(e) => {
                            if state.above_gap.is_none() {
                                tracing::warn!(error = %toolgate_protocol::error::with_causes(&e), "call ids cannot be reserved in the audit store now; the call log keeps taking calls, with ids above a gap, until they can");
                            }
                            let from = state.above_gap.map_or(state.last + GAP, |(f, _)| f);
                            state.above_gap = Some((from, Instant::now() + DOWN_FOR));
                        }
                    }
                }
            }
        }
    }

    /// Stop the reserver (ids already given stay given).
    pub fn stop(&self) {
        self.shared.state.lock().stopping = true;
        self.shared.cue.notify_all();
        if let Some(reserver) = self.reserver.lock().take() {
            let _ = reserver.join();
        }
    }
}

impl Drop for Ids {
    fn drop(&mut self) {
        self.stop();
    }
}

fn reserve(shared: &Shared, conn: &Mutex<Connection>, size: i64) -> Result<Block, StoreError> {
    let mut conn = conn.lock();
    // Above every id given (ids above a gap included), as of when the
    // store's lock is held.
    let floor = || {
        let state = shared.state.lock();
        state.floor.max(state.last)
    };
    let first = crate::store::sqlite::reserve_ids(&mut conn, size, floor).map_err(|source| {
        StoreError::Sqlite {
            context: format!("reserving call ids in the audit store {}", shared.shown),
            source,
        }
    })?;
    Ok(Block {
        next: first,
        end: first + size,
        at: Instant::now(),
    })
}

/// Keep a spare block ready, and reserved less than half [`FRESH_FOR`]
/// ago, while calls come.
fn reserve_spares(shared: &Shared) {
    loop {
        let size = {
            let mut state = shared.state.lock();
            loop {
                if state.stopping {
                    return;
                }
                let now = Instant::now();
                let stale = state
                    .spare
                    .is_none_or(|s| now.duration_since(s.at) >= FRESH_FOR / 2);
                if state.wanted || (state.active && stale) {
                    break;
                }
                match state.spare {
                    // Calls come: renew it when it is half-way stale.
                    Some(spare) if state.active => {
                        let due = spare.at + FRESH_FOR / 2;
                        let _ = shared.cue.wait_until(&mut state, due);
                    }
                    // None came since: wait for one.
                    _ => {
                        state.idle = true;
                        shared.cue.wait(&mut state);
                        state.idle = false;
                    }
                }
            }
            state.wanted = false;
            state.active = false;
            state.size
        };
        match reserve(shared, &shared.conn, size) {
            Ok(block) => shared.state.lock().spare = Some(block),
            // Calls take ids above the gap meanwhile; the next call asks
            // again, after a pause (a store that fails at once).
            Err(e) => {
                tracing::debug!(error = %e, "a spare block of call ids could not be reserved");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("audit.db");
        drop(crate::store::sqlite::open_for_writing(&db).unwrap());
        (dir, db)
    }

    #[test]
    fn ids_rise_and_a_committed_writer_takes_ids_above_every_reservation() {
        let (_dir, db) = store();
        let ids = Ids::start(&db, 40).unwrap();
        let given: Vec<i64> = (0..100).map(|_| ids.next()).collect();
        assert!(given.windows(2).all(|w| w[0] < w[1]), "{given:?}");
        assert!(given[0] > 40, "the floor: {given:?}");
        // What a committed writer inserts now lands above all of them,
        // and above the spare reserved meanwhile.
        let conn = crate::store::sqlite::open_for_writing(&db).unwrap();
        conn.execute(
            &format!(
                "INSERT INTO calls (id, time_ms, tool, arguments_digest, status, latency_ms) VALUES ({}, 1, 'a.t', '', 'ok', 0)",
                crate::store::sqlite::NEXT_ID
            ),
            [],
        )
        .unwrap();
        let committed: i64 = conn
            .query_row("SELECT MAX(id) FROM calls", [], |r| r.get(0))
            .unwrap();
        let upto: i64 = conn
            .query_row("SELECT upto FROM call_ids", [], |r| r.get(0))
            .unwrap();
        assert_eq!(committed, upto + 1);
        // And the log's next ids are above the committed row.
        ids.stop();
        let later = Ids::start(&db, 0).unwrap();
        assert!(later.next() > committed);
    }

    #[test]
    fn two_logs_never_give_the_same_id() {
        let (_dir, db) = store();
        let open = || Ids::start(&db, 0).unwrap();
        let (a, b) = (open(), open());
        let mut all = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            assert!(all.insert(a.next()));
            assert!(all.insert(b.next()));
        }
    }

    #[test]
    fn while_the_store_is_held_ids_go_on_above_a_gap_and_blocks_follow_above_them() {
        let (_dir, db) = store();
        let ids = Ids::start(&db, 0).unwrap();
        let before = ids.next();
        // Another writer holds the store's write lock.
        let holder = crate::store::sqlite::open_for_writing(&db).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        // Stale blocks force a reservation, which cannot be made now (a
        // call waits WAIT_ON_A_CALL for it).
        std::thread::sleep(FRESH_FOR * 2);
        let during: Vec<i64> = (0..5).map(|_| ids.next()).collect();
        assert!(during[0] >= before + GAP, "{before} {during:?}");
        assert!(during.windows(2).all(|w| w[1] == w[0] + 1), "{during:?}");
        // A committed writer, once it can write, takes an id below the
        // gap's: no collision with the calls the log took meanwhile.
        holder
            .execute(
                &format!(
                    "INSERT INTO calls (id, time_ms, tool, arguments_digest, status, latency_ms) VALUES ({}, 1, 'a.t', '', 'ok', 0)",
                    crate::store::sqlite::NEXT_ID
                ),
                [],
            )
            .unwrap();
        holder.execute_batch("COMMIT").unwrap();
        let committed: i64 = holder
            .query_row("SELECT MAX(id) FROM calls", [], |r| r.get(0))
            .unwrap();
        assert!(committed < during[0]);
        // Blocks come back, above the gap's ids.
        std::thread::sleep(DOWN_FOR + FRESH_FOR);
        let after = ids.next();
        assert!(after > during[4], "{after} {during:?}");
    }
}
