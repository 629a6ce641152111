//! One record of the call log, and how it is laid out on disk.
//!
//! ```text
//! u32 LE  length of the body
//! u32 LE  CRC-32 (IEEE) of the body
//! body:   u8 kind (1 begin, 2 outcome, 3 whole row)
//!         i64 LE call id
//!         the row's fields, each a fixed-width number or a string as
//!         u32 LE length (u32::MAX: none) and its bytes
//! ```
//!
//! Binary rather than JSON lines: the arguments and the result summary are
//! JSON text already, and go in as the bytes at hand (JSON would escape
//! them again). A record whose length runs past the end of the file, or
//! whose checksum does not match, is torn (the process died mid-write) or
//! altered; [`decode`] says which it can tell.
//!
//! Layer: `store`.

use crate::store::audit::AuditRow;

/// The most a record's body may hold (arguments are bounded far below it
/// by the server's request limits).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// Bytes before the body: its length and checksum.
pub const HEADER: usize = 8;

/// What a record says of its call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The call was forwarded (its row written ahead).
    Begin = 1,
    /// How a call begun earlier ended.
    Outcome = 2,
    /// A call recorded once, whole (refused before any forward).
    Row = 3,
}

/// One record.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// What it says.
    pub kind: Kind,
    /// The call's row (its `id` is the call's id in the log and the store).
    pub row: AuditRow,
}

/// Why bytes are not a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Fewer bytes than the record claims: the end of a write that did not
    /// finish (at the end of a segment), or a file cut short.
    Short,
    /// The checksum does not match, or the body does not parse: altered.
    Corrupt,
}

fn put_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
    }
}

/// Append `record` to `out`, header and body.
pub fn encode(record: &Record, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    let r = &record.row;
    out.push(record.kind as u8);
    out.extend_from_slice(&r.id.to_le_bytes());
    out.extend_from_slice(&r.time_ms.to_le_bytes());
    out.extend_from_slice(&r.latency_ms.to_le_bytes());
    match r.cost {
        Some(c) => {
            out.push(1);
            out.extend_from_slice(&c.to_le_bytes());
        }
        None => out.push(0),
    }
    put_str(out, Some(&r.tool));
    put_str(out, Some(&r.arguments_digest));
    put_str(out, Some(&r.status));
    for s in [
        &r.caller,
        &r.upstream,
        &r.arguments,
        &r.decision,
        &r.rule,
        &r.confirmation,
        &r.grant,
        &r.result,
        &r.trace_id,
        &r.endpoint,
        &r.shown,
        &r.flow,
        &r.flow_labels,
        &r.identity,
        &r.via,
    ] {
        put_str(out, s.as_deref());
    }
    let body = &out[start + HEADER..];
    let len = body.len() as u32;
    let crc = crc32fast::hash(body);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
}

/// Reads a body, field by field.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        if self.bytes.len() < n {
            return Err(Bad::Corrupt);
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Bad> {
        self.take(N)?.try_into().map_err(|_| Bad::Corrupt)
    }

    fn string(&mut self) -> Result<Option<String>, Bad> {
        let len = u32::from_le_bytes(self.array()?);
        if len == u32::MAX {
            return Ok(None);
        }
        let bytes = self.take(len as usize)?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| Bad::Corrupt)
    }

    fn required(&mut self) -> Result<String, Bad> {
        self.string()?.ok_or(Bad::Corrupt)
    }
}

/// The record at the start of `bytes` and how many bytes it took.
pub fn decode(bytes: &[u8]) -> Result<(Record, usize), Bad> {
    if bytes.len() < HEADER {
        return Err(Bad::Short);
    }
    let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if len > MAX_BODY {
        return Err(Bad::Corrupt);
    }
    let Some(body) = bytes.get(HEADER..HEADER + len) else {
        return Err(Bad::Short);
    };
    if crc32fast::hash(body) != crc {
        return Err(Bad::Corrupt);
    }
    let mut r = Reader { bytes: body };
    let kind = match r.array::<1>()?[0] {
        1 => Kind::Begin,
        2 => Kind::Outcome,
        3 => Kind::Row,
        _ => return Err(Bad::Corrupt),
    };
    let id = i64::from_le_bytes(r.array()?);
    let time_ms = i64::from_le_bytes(r.array()?);
    let latency_ms = f64::from_le_bytes(r.array()?);
    let cost = match r.array::<1>()?[0] {
        0 => None,
        1 => Some(f64::from_le_bytes(r.array()?)),
        _ => return Err(Bad::Corrupt),
    };
    let tool = r.required()?;
    let arguments_digest = r.required()?;
    let status = r.required()?;
    let row = AuditRow {
        id,
        time_ms,
        latency_ms,
        cost,
        tool,
        arguments_digest,
        status,
        caller: r.string()?,
        upstream: r.string()?,
        arguments: r.string()?,
        decision: r.string()?,
        rule: r.string()?,
        confirmation: r.string()?,
        grant: r.string()?,
        result: r.string()?,
        trace_id: r.string()?,
        endpoint: r.string()?,
        shown: r.string()?,
        flow: r.string()?,
        flow_labels: r.string()?,
        identity: r.string()?,
        // Records written before `via` end here.
        via: if r.bytes.is_empty() {
            None
        } else {
            r.string()?
        },
    };
    if !r.bytes.is_empty() {
        return Err(Bad::Corrupt);
    }
    Ok((Record { kind, row }, HEADER + len))
}

/// A whole-row record of the call `id` (for tests).
#[cfg(test)]
pub(crate) fn record_for_tests(id: i64) -> Record {
    Record {
        kind: Kind::Row,
        row: AuditRow {
            id,
            tool: "t".into(),
            status: "ok".into(),
            ..AuditRow::default()
        },
    }
}

/// Whole-row records of the calls `ids`, back to back (for tests).
#[cfg(test)]
pub(crate) fn records_for_tests(ids: std::ops::Range<i64>) -> Vec<u8> {
    let mut out = Vec::new();
    for id in ids {
        encode(&record_for_tests(id), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64) -> AuditRow {
        AuditRow {
            id,
            time_ms: 1_765_000_000_000,
            caller: Some("alice".into()),
            upstream: Some("shop".into()),
            tool: "shop.order".into(),
            arguments_digest: "sha256:ab".into(),
            arguments: Some(r#"{"sku":"SKU-\"1\""}"#.into()),
            decision: Some("allow".into()),
            status: "ok".into(),
            latency_ms: 1.25,
            cost: Some(2.5),
            result: Some("1 block: text (3 chars)".into()),
            identity: Some("alice (exchange)".into()),
            ..AuditRow::default()
        }
    }

    #[test]
    fn a_record_comes_back_as_written_with_the_arguments_bytes_untouched() {
        let mut out = Vec::new();
        for (kind, id) in [(Kind::Begin, 7), (Kind::Outcome, 7), (Kind::Row, 8)] {
            encode(&Record { kind, row: row(id) }, &mut out);
        }
        // The arguments are in the file as they were, not escaped again.
        assert!(out.windows(17).any(|w| w == br#"{"sku":"SKU-\"1\""#));
        let mut at = 0;
        let mut back = Vec::new();
        while at < out.len() {
            let (record, used) = decode(&out[at..]).unwrap();
            back.push((record.kind, record.row.id));
            assert_eq!(record.row, row(record.row.id));
            at += used;
        }
        assert_eq!(back, [(Kind::Begin, 7), (Kind::Outcome, 7), (Kind::Row, 8)]);
    }

    #[test]
    fn a_torn_or_altered_record_is_told_apart_and_never_read_half() {
        let mut out = Vec::new();
        encode(
            &Record {
                kind: Kind::Row,
                row: row(1),
            },
            &mut out,
        );
        // Cut anywhere: short, never a record.
        for cut in 0..out.len() {
            assert_eq!(decode(&out[..cut]).err(), Some(Bad::Short), "cut at {cut}");
        }
        // One bit changed anywhere in the body or checksum: corrupt.
        for at in 4..out.len() {
            let mut bad = out.clone();
            bad[at] ^= 0x10;
            assert_eq!(decode(&bad).err(), Some(Bad::Corrupt), "bit at {at}");
        }
        // A length past the bound is not believed.
        let mut huge = out.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&huge).err(), Some(Bad::Corrupt));
    }
}
