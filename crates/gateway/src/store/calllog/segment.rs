//! The call log's files: numbered segments in one directory, appended to
//! by one writer and read by the indexer from a position.
//!
//! A segment is `NNNNNNNNNNNNNNNN.log` (its number, zero-padded so names
//! sort as numbers) holding whole records ([`super::record`]). The writer
//! appends to the newest and starts the next past [`SEGMENT_BYTES`]; the
//! indexer removes a segment once every record in it is in the indexed
//! store. Opened for writing, the newest segment is checked: a record cut
//! short at its end (the process or the machine died mid-write) is cut
//! off, with a warning; a record that does not check out before the end
//! (the file was altered) sets the segment aside as `….log.corrupt`,
//! untouched, for `toolgate log --verify` and a person to look at.
//!
//! Layer: `store`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use super::record::{self, Bad, HEADER, Record};

/// Where a segment is begun anew.
pub const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// A place in the log: a segment and a byte offset in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// The segment's number.
    pub segment: u64,
    /// Bytes into it.
    pub offset: u64,
}

/// The path of segment `n` in `dir`.
pub fn path_of(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:016}.log"))
}

/// The segments in `dir`, oldest first.
pub fn list(dir: &Path) -> io::Result<Vec<u64>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(n) = name
            .strip_suffix(".log")
            .filter(|stem| stem.len() == 16)
            .and_then(|stem| stem.parse::<u64>().ok())
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// How reading a segment ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// At the end of its last whole record.
    Clean,
    /// A record cut short at the end: `bytes` after the last whole one.
    Torn {
        /// Where the whole records end.
        at: u64,
        /// What follows them.
        bytes: u64,
    },
    /// A record that does not check out, before the end of the file.
    Corrupt {
        /// Where it starts.
        at: u64,
    },
}

/// The whole records of segment `n` from `offset`, each with the offset
/// just past it, and how the segment ended.
pub fn read(dir: &Path, n: u64, offset: u64) -> io::Result<(Vec<(Record, u64)>, End)> {
    let mut file = File::open(path_of(dir, n))?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let mut out = Vec::new();
    let mut at = 0usize;
    let end = loop {
        if at == bytes.len() {
            break End::Clean;
        }
        match record::decode(&bytes[at..]) {
            Ok((record, used)) => {
                at += used;
                out.push((record, offset + at as u64));
            }
            Err(Bad::Short) => {
                break End::Torn {
                    at: offset + at as u64,
                    bytes: (bytes.len() - at) as u64,
                };
            }
            // A last record whose claimed length reaches the end of the
            // file was being written when the writing stopped: torn.
            Err(Bad::Corrupt) if reaches_end(&bytes[at..]) => {
                break End::Torn {
                    at: offset + at as u64,
                    bytes: (bytes.len() - at) as u64,
                };
            }
            Err(Bad::Corrupt) => {
                break End::Corrupt {
                    at: offset + at as u64,
                };
            }
        }
    };
    Ok((out, end))
}

/// Whether the record starting `rest` claims every byte left (or more).
fn reaches_end(rest: &[u8]) -> bool {
    if rest.len() < HEADER {
        return true;
    }
    let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    HEADER + len >= rest.len()
}

/// Appends records to the newest segment.
pub struct Appender {
    dir: PathBuf,
    /// Shared with the syncer, which syncs it off the appenders' lock.
    file: std::sync::Arc<File>,
    at: Position,
    limit: u64,
}

/// What opening the log found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Opened {
    /// Bytes of a torn last record cut off.
    pub torn_bytes: u64,
    /// A segment set aside because a record in it does not check out.
    pub set_aside: Option<PathBuf>,
}

impl Appender {
    /// Open the log in `dir` (made if missing) for appending.
    pub fn open(dir: &Path) -> io::Result<(Self, Opened)> {
        Self::open_with_limit(dir, SEGMENT_BYTES)
    }

    /// [`Appender::open`], starting a new segment past `limit` bytes.
    pub fn open_with_limit(dir: &Path, limit: u64) -> io::Result<(Self, Opened)> {
        std::fs::create_dir_all(dir)?;
        let mut opened = Opened::default();
        let newest = list(dir)?.last().copied();
        let segment = match newest {
            None => 0,
            Some(n) => match read(dir, n, 0)?.1 {
                End::Clean => n,
                End::Torn { at, bytes } => {
                    let file = OpenOptions::new().write(true).open(path_of(dir, n))?;
                    file.set_len(at)?;
                    file.sync_all()?;
                    opened.torn_bytes = bytes;
                    n
                }
                End::Corrupt { .. } => {
                    let aside = path_of(dir, n).with_extension("log.corrupt");
                    std::fs::rename(path_of(dir, n), &aside)?;
                    opened.set_aside = Some(aside);
                    n + 1
                }
            },
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path_of(dir, segment))?;
        let offset = file.metadata()?.len();
        Ok((
            Self {
                dir: dir.to_owned(),
                file: std::sync::Arc::new(file),
                at: Position { segment, offset },
                limit,
            },
            opened,
        ))
    }

    /// Append `bytes` (whole records) with one write, beginning the next
    /// segment first when this one is full. Where the log ends after it.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<Position> {
        if self.at.offset > 0 && self.at.offset + bytes.len() as u64 > self.limit {
            // What is in the full segment is on disk before the next
            // begins: the indexer finishes a segment before the next.
            self.file.sync_data()?;
            let next = self.at.segment + 1;
            self.file = std::sync::Arc::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path_of(&self.dir, next))?,
            );
            self.at = Position {
                segment: next,
                offset: 0,
            };
        }
        if let Err(e) = (&*self.file).write_all(bytes) {
            // Part of it may be in the file: cut it back, so the next
            // append follows whole records (a disk that filled up).
            let _ = self.file.set_len(self.at.offset);
            return Err(e);
        }
        self.at.offset += bytes.len() as u64;
        Ok(self.at)
    }

    /// The segment being appended to, to sync without holding the
    /// appender.
    pub fn file(&self) -> std::sync::Arc<File> {
        self.file.clone()
    }

    /// Where the log ends.
    pub fn position(&self) -> Position {
        self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::calllog::record::records_for_tests as records;

    fn ids(dir: &Path, n: u64) -> Vec<i64> {
        read(dir, n, 0)
            .unwrap()
            .0
            .iter()
            .map(|(r, _)| r.row.id)
            .collect()
    }

    #[test]
    fn records_are_appended_across_segments_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, opened) = Appender::open_with_limit(dir.path(), 200).unwrap();
        assert_eq!(opened, Opened::default());
        for i in 0..5 {
            log.append(&records(i * 3..i * 3 + 3)).unwrap();
        }
        let segments = list(dir.path()).unwrap();
        assert!(segments.len() > 1, "{segments:?}");
        let all: Vec<i64> = segments.iter().flat_map(|n| ids(dir.path(), *n)).collect();
        assert_eq!(all, (0..15).collect::<Vec<_>>());
        // From a position: what follows it.
        let (rest, end) = read(dir.path(), segments[0], 0).unwrap();
        let after_first = rest[0].1;
        let (tail, _) = read(dir.path(), segments[0], after_first).unwrap();
        assert_eq!(tail.len(), rest.len() - 1);
        assert_eq!(end, End::Clean);
    }

    #[test]
    fn a_torn_last_record_is_cut_off_and_appending_goes_on_after_the_whole_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Appender::open(dir.path()).unwrap();
        log.append(&records(0..3)).unwrap();
        drop(log);
        // The process died in the middle of writing a fourth.
        let half = records(3..4);
        let mut file = OpenOptions::new()
            .append(true)
            .open(path_of(dir.path(), 0))
            .unwrap();
        file.write_all(&half[..half.len() / 2]).unwrap();
        assert!(matches!(
            read(dir.path(), 0, 0).unwrap().1,
            End::Torn { .. }
        ));
        let (mut log, opened) = Appender::open(dir.path()).unwrap();
        assert_eq!(opened.torn_bytes, (half.len() / 2) as u64);
        log.append(&records(4..5)).unwrap();
        assert_eq!(ids(dir.path(), 0), [0, 1, 2, 4]);
    }

    #[test]
    fn an_altered_segment_is_set_aside_untouched_and_a_new_one_begun() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Appender::open(dir.path()).unwrap();
        log.append(&records(0..3)).unwrap();
        drop(log);
        // A byte changed by hand in the first record.
        let path = path_of(dir.path(), 0);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER + 2] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            read(dir.path(), 0, 0).unwrap().1,
            End::Corrupt { at: 0 }
        ));
        let (mut log, opened) = Appender::open(dir.path()).unwrap();
        let aside = opened.set_aside.unwrap();
        assert_eq!(std::fs::read(&aside).unwrap(), bytes, "kept as it was");
        log.append(&records(3..4)).unwrap();
        assert_eq!(list(dir.path()).unwrap(), [1]);
        assert_eq!(ids(dir.path(), 1), [3]);
    }
}
