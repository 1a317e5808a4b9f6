//! The trace file: CSV, a header line `arrival_us,op,file,offset,size`, then one request per
//! line in arrival order. Blank lines and lines starting with `#` are ignored anywhere.
//!
//! - `arrival_us`: when the request arrives, microseconds from the start of the trace.
//! - `op`: `read` or `write` (`offset`, `size` in bytes, size >= 1), or `create` / `delete`
//!   (a file appearing or going away during the trace; `offset` and `size` must be 0).
//! - `file`: a file name in the root directory (no `/`, no NUL, at most 255 bytes).
//!
//! A file whose first request is not `create` exists before the trace starts; the replayer
//! creates it and fills it up to the last byte the trace touches in it. A file's lifetime
//! is checked here, so a bad trace is refused with a line number before anything runs:
//! no `create` of a live file, no request to a deleted file until it is created again.
//! See docs/trace-format.md.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};

pub const HEADER: &str = "arrival_us,op,file,offset,size";

/// Largest read or write: the replayer holds one request's bytes in memory.
pub const MAX_REQUEST_BYTES: u64 = 256 << 20;

/// Latest arrival accepted (about 35 years): arrival times in nanoseconds then fit a u64
/// with room for the device clock's own start.
pub const MAX_ARRIVAL_US: u64 = 1 << 50;

/// The file system's longest name.
const NAME_MAX: usize = 255;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Create,
    Delete,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Create => "create",
            Op::Delete => "delete",
        }
    }

    fn parse(text: &str) -> Option<Op> {
        match text {
            "read" => Some(Op::Read),
            "write" => Some(Op::Write),
            "create" => Some(Op::Create),
            "delete" => Some(Op::Delete),
            _ => None,
        }
    }

    /// Reads and writes move data; create and delete only change the namespace.
    pub fn moves_data(self) -> bool {
        matches!(self, Op::Read | Op::Write)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub arrival_us: u64,
    pub op: Op,
    pub file: String,
    pub offset: u64,
    pub size: u64,
}

/// A trace refused, and the line that made it so (1-based, counting every line).
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

fn err(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// Parses a whole trace file.
pub fn parse(bytes: &[u8]) -> Result<Vec<Request>, ParseError> {
    let mut requests = Vec::new();
    let mut lines_of = Vec::new();
    let mut seen_header = false;
    let mut last_line = 0;
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        last_line = line;
        let text = std::str::from_utf8(raw)
            .map_err(|_| err(line, "not UTF-8 text"))?
            .trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        if !seen_header {
            let fields: Vec<&str> = text.split(',').map(str::trim).collect();
            if fields.join(",") != HEADER {
                return Err(err(
                    line,
                    format!("expected the header '{HEADER}', found '{}'", shorten(text)),
                ));
            }
            seen_header = true;
            continue;
        }
        requests.push(parse_request(text, line)?);
        lines_of.push(line);
    }
    if !seen_header {
        return Err(err(
            last_line.max(1),
            format!("empty trace: no header '{HEADER}'"),
        ));
    }
    if requests.is_empty() {
        return Err(err(last_line, "the trace has no requests"));
    }
    check(&requests, |i| lines_of[i])?;
    Ok(requests)
}

fn parse_request(text: &str, line: usize) -> Result<Request, ParseError> {
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if fields.len() != 5 {
        return Err(err(
            line,
            format!(
                "expected 5 fields ({HEADER}), found {}: '{}'",
                fields.len(),
                shorten(text)
            ),
        ));
    }
    let number = |field: &str, what: &str| -> Result<u64, ParseError> {
        field.parse::<u64>().map_err(|_| {
            err(
                line,
                format!("{what} '{}' is not a whole number", shorten(field)),
            )
        })
    };
    let arrival_us = number(fields[0], "arrival_us")?;
    if arrival_us > MAX_ARRIVAL_US {
        return Err(err(
            line,
            format!("arrival_us {arrival_us} is too late (at most {MAX_ARRIVAL_US})"),
        ));
    }
    let op = Op::parse(fields[1]).ok_or_else(|| {
        err(
            line,
            format!(
                "op '{}' is not one of read, write, create, delete",
                shorten(fields[1])
            ),
        )
    })?;
    let file = fields[2];
    check_name(file).map_err(|m| err(line, m))?;
    let offset = number(fields[3], "offset")?;
    let size = number(fields[4], "size")?;
    if op.moves_data() {
        if size == 0 {
            return Err(err(line, format!("a {} of 0 bytes", op.name())));
        }
        if size > MAX_REQUEST_BYTES {
            return Err(err(
                line,
                format!("size {size} is larger than the largest request ({MAX_REQUEST_BYTES})"),
            ));
        }
        if offset.checked_add(size).is_none() {
            return Err(err(line, "offset + size overflows"));
        }
    } else if offset != 0 || size != 0 {
        return Err(err(
            line,
            format!("{} takes offset 0 and size 0", op.name()),
        ));
    }
    Ok(Request {
        arrival_us,
        op,
        file: file.to_string(),
        offset,
        size,
    })
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty file name".into());
    }
    if name == "." || name == ".." {
        return Err(format!("'{name}' is not a file name"));
    }
    if name.contains('/') || name.contains('\0') {
        return Err(format!(
            "file name '{}' contains '/' or NUL (files live in the root directory)",
            shorten(name)
        ));
    }
    if name.len() > NAME_MAX {
        return Err(format!("file name longer than {NAME_MAX} bytes"));
    }
    Ok(())
}

/// Long fields are cut in messages, so one bad line cannot flood the terminal.
pub(crate) fn shorten(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// Where a file stands at some point of the trace.
#[derive(Clone, Copy)]
enum Life {
    Live,
    /// Deleted by the request on this line.
    Gone(usize),
}

/// Checks what no single line shows: arrival order and file lifetimes. `line_of` maps a
/// request's index to the line it came from.
pub fn check(requests: &[Request], line_of: impl Fn(usize) -> usize) -> Result<(), ParseError> {
    let mut last_arrival = 0;
    let mut files: HashMap<&str, Life> = HashMap::new();
    for (i, r) in requests.iter().enumerate() {
        let line = line_of(i);
        if r.arrival_us < last_arrival {
            return Err(err(
                line,
                format!(
                    "arrival_us {} is before the previous request's {last_arrival} \
                     (requests must be in arrival order)",
                    r.arrival_us
                ),
            ));
        }
        last_arrival = r.arrival_us;
        let state = files.get(r.file.as_str()).copied();
        let next = match (r.op, state) {
            (Op::Create, Some(Life::Live)) => {
                return Err(err(
                    line,
                    format!("create of '{}', which already exists", r.file),
                ))
            }
            (Op::Create, _) => Life::Live,
            (_, Some(Life::Gone(at))) => {
                return Err(err(
                    line,
                    format!(
                        "{} of '{}', deleted on line {at} and not created again",
                        r.op.name(),
                        r.file
                    ),
                ))
            }
            (Op::Delete, _) => Life::Gone(line),
            (Op::Read | Op::Write, _) => Life::Live,
        };
        files.insert(&r.file, next);
    }
    Ok(())
}

/// Writes a trace in the format `parse` reads; `comments` go first, each as a `#` line.
pub fn write(out: &mut impl Write, comments: &[String], requests: &[Request]) -> io::Result<()> {
    for c in comments {
        for line in c.lines() {
            writeln!(out, "# {line}")?;
        }
    }
    writeln!(out, "{HEADER}")?;
    for r in requests {
        writeln!(
            out,
            "{},{},{},{},{}",
            r.arrival_us,
            r.op.name(),
            r.file,
            r.offset,
            r.size
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# a comment\n\
        arrival_us,op,file,offset,size\n\
        0,create,log,0,0\n\
        10,write,log,0,4096\r\n\
        \n\
        10, read ,assets,8192,2048\n\
        25,delete,log,0,0\n\
        30,create,log,0,0\n";

    fn line_error(text: &str) -> ParseError {
        parse(text.as_bytes()).expect_err("the trace should be refused")
    }

    #[test]
    fn a_good_trace_parses_and_round_trips() {
        let trace = parse(GOOD.as_bytes()).unwrap();
        assert_eq!(trace.len(), 5);
        assert_eq!(
            trace[2],
            Request {
                arrival_us: 10,
                op: Op::Read,
                file: "assets".into(),
                offset: 8192,
                size: 2048
            }
        );
        let mut out = Vec::new();
        write(&mut out, &["made by a test".into()], &trace).unwrap();
        assert!(out.starts_with(b"# made by a test\narrival_us,op,file"));
        assert_eq!(parse(&out).unwrap(), trace);
    }

    #[test]
    fn a_bad_header_names_line_one() {
        let e = line_error("time,op,file,offset,size\n0,read,a,0,1\n");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("header"), "{e}");
        assert_eq!(line_error("").line, 1);
        let e = line_error("# only a comment\n\n");
        assert!(e.message.contains("empty"), "{e}");
    }

    #[test]
    fn every_kind_of_bad_line_names_its_line() {
        let cases = [
            ("0,read,a,0", "5 fields"),
            ("0,read,a,0,1,2", "5 fields"),
            ("soon,read,a,0,1", "arrival_us"),
            ("-1,read,a,0,1", "arrival_us"),
            ("99999999999999999999,read,a,0,1", "arrival_us"),
            ("1125899906842625,read,a,0,1", "too late"),
            ("0,append,a,0,1", "op 'append'"),
            ("0,READ,a,0,1", "op 'READ'"),
            ("0,read,,0,1", "empty file name"),
            ("0,read,d/a,0,1", "'/'"),
            ("0,read,..,0,1", "not a file name"),
            ("0,read,a,x,1", "offset"),
            ("0,read,a,0,1.5", "size"),
            ("0,write,a,0,0", "0 bytes"),
            ("0,read,a,0,268435457", "largest request"),
            ("0,read,a,18446744073709551615,2", "overflows"),
            ("0,create,a,0,1", "offset 0 and size 0"),
            ("0,delete,a,4,0", "offset 0 and size 0"),
        ];
        for (bad, expect) in cases {
            let text = format!("{HEADER}\n0,read,ok,0,1\n{bad}\n");
            let e = line_error(&text);
            assert_eq!(e.line, 3, "{bad}: {e}");
            assert!(e.message.contains(expect), "{bad}: {e}");
            assert!(e.to_string().starts_with("line 3: "), "{e}");
        }
        let e = parse(b"arrival_us,op,file,offset,size\n0,read,\xff,0,1\n").unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (2, "not UTF-8 text"));
    }

    #[test]
    fn order_and_lifetimes_are_checked_with_line_numbers() {
        let cases = [
            ("5,read,a,0,1\n4,read,a,0,1", 3, "arrival order"),
            ("0,read,a,0,1\n1,create,a,0,0", 3, "already exists"),
            ("0,delete,a,0,0\n1,read,a,0,1", 3, "deleted on line 2"),
            (
                "0,create,a,0,0\n1,delete,a,0,0\n\n2,delete,a,0,0",
                5,
                "deleted on line 3",
            ),
        ];
        for (body, line, expect) in cases {
            let e = line_error(&format!("{HEADER}\n{body}\n"));
            assert_eq!(e.line, line, "{body}: {e}");
            assert!(e.message.contains(expect), "{body}: {e}");
        }
        // A file deleted and created again is live.
        parse(format!("{HEADER}\n0,delete,a,0,0\n1,create,a,0,0\n2,read,a,0,1\n").as_bytes())
            .unwrap();
    }

    #[test]
    fn a_header_without_requests_is_refused() {
        let e = line_error(&format!("{HEADER}\n\n"));
        assert!(e.message.contains("no requests"), "{e}");
    }
}
