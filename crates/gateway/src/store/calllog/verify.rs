//! `toolgate log --verify`: every segment of a call log read through, each
//! record's checksum checked, and what does not check out reported — a
//! record cut short at the end (a write that did not finish: harmless, it
//! is dropped at the next start) apart from one altered before the end (the
//! file was edited: the calls after it in that segment are not indexed),
//! and segments set aside earlier.
//!
//! Layer: `store`.

use std::path::{Path, PathBuf};

use super::segment::{self, End};

/// What one segment holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// Its file.
    pub path: PathBuf,
    /// Whole records that check out.
    pub records: usize,
    /// How it ends.
    pub end: End,
}

/// What a call log holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Each segment, oldest first.
    pub segments: Vec<Checked>,
    /// Segments set aside as altered (`….log.corrupt`).
    pub set_aside: Vec<PathBuf>,
}

impl Report {
    /// Whether every record checks out and nothing was set aside (a torn
    /// end is a write that did not finish, not damage).
    pub fn sound(&self) -> bool {
        self.set_aside.is_empty()
            && self
                .segments
                .iter()
                .all(|s| !matches!(s.end, End::Corrupt { .. }))
    }
}

/// Check the call log in `dir`.
pub fn verify(dir: &Path) -> std::io::Result<Report> {
    let mut report = Report::default();
    for n in segment::list(dir)? {
        let (records, end) = segment::read(dir, n, 0)?;
        report.segments.push(Checked {
            path: segment::path_of(dir, n),
            records: records.len(),
            end,
        });
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".log.corrupt"))
        {
            report.set_aside.push(path);
        }
    }
    report.set_aside.sort();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::calllog::record::{HEADER, records_for_tests};
    use crate::store::calllog::segment::Appender;

    fn bytes(n: i64) -> Vec<u8> {
        records_for_tests(0..n)
    }

    #[test]
    fn an_edited_record_is_reported_and_a_torn_end_is_not_damage() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Appender::open(dir.path()).unwrap();
        log.append(&bytes(4)).unwrap();
        drop(log);
        let clean = verify(dir.path()).unwrap();
        assert!(clean.sound());
        assert_eq!(clean.segments[0].records, 4);
        // A torn end: sound, said.
        let path = segment::path_of(dir.path(), 0);
        let mut file = std::fs::read(&path).unwrap();
        file.extend_from_slice(&[9, 0, 0, 0, 1]);
        std::fs::write(&path, &file).unwrap();
        let torn = verify(dir.path()).unwrap();
        assert!(torn.sound());
        assert!(matches!(torn.segments[0].end, End::Torn { bytes: 5, .. }));
        // A byte edited in the second record: reported where.
        let second = HEADER + 3 + (file.len() - 5) / 4;
        file[second] ^= 0x01;
        std::fs::write(&path, &file).unwrap();
        let edited = verify(dir.path()).unwrap();
        assert!(!edited.sound());
        assert!(matches!(edited.segments[0].end, End::Corrupt { .. }));
        assert_eq!(edited.segments[0].records, 1);
    }
}
