//! The scanner's three block patterns (ncdoc/evidence/nccl_log_patterns.py: VIA, AGG, SCAN),
//! matched by hand with the same results as Python's `re` on them: the same matches at the same
//! places, found in the same order (each pattern's backtracking is worked out in the comments).
//! A change to one of those patterns needs its twin here; tests/evidence/test_native_scan.py
//! compares the two on random and real text.

use crate::find::{byte, each_byte, each_pair, is_digit, is_word, line_end, run, starts};

// ---------------------------------------------------------------- VIA

/// VIA's group at `q` (just after " via "): its end, or None.
///
/// `((?:NET|COLLNET)/[^/\r\n]{1,40}/\d[^ \r\n]*|(?:NET|P2P|SHM|COLLNET)/[^ \r\n]*|direct shared memory)`
pub fn via_at(h: &[u8], q: usize) -> Option<usize> {
    let tail_end = |at: usize| run(h, at, |b| b != b' ' && b != b'\r' && b != b'\n');
    let net = if starts(h, q, b"NET/") {
        Some(q + 4)
    } else if starts(h, q, b"COLLNET/") {
        Some(q + 8)
    } else {
        None
    };
    if let Some(a) = net {
        // [^/\r\n]{1,40} can only be followed by "/" at the end of its longest run
        let mut i = a;
        while i < h.len() && i - a <= 40 && !matches!(h[i], b'/' | b'\r' | b'\n') {
            i += 1;
        }
        let l = i - a;
        if (1..=40).contains(&l) && i + 1 < h.len() && h[i] == b'/' && is_digit(h[i + 1]) {
            return Some(tail_end(i + 2));
        }
    }
    for p in [&b"NET/"[..], b"P2P/", b"SHM/", b"COLLNET/"] {
        if starts(h, q, p) {
            return Some(tail_end(q + p.len()));
        }
    }
    if starts(h, q, b"direct shared memory") {
        return Some(q + 20);
    }
    None
}

/// `VIA.findall(h)` as (start, end) of each group, in order.
pub fn via_all(h: &[u8], mut out: impl FnMut(usize, usize)) {
    let mut pos = 0; // the next match starts here or later
    // " via ": candidates where 'v' and 'a' stand one byte apart, then the whole literal
    each_pair(h, b'v', 1, b'a', 3, |at| {
        if at >= pos && starts(h, at, b" via ") {
            if let Some(e) = via_at(h, at + 5) {
                out(at + 5, e);
                pos = e;
            }
        }
    });
}

// ---------------------------------------------------------------- AGG

const COLLS: [&[u8]; 11] = [b"AllReduce", b"AllGather", b"AllToAll", b"ReduceScatter", b"Reduce", b"Broadcast",
                            b"SendRecv", b"Send", b"Recv", b"Gather", b"Scatter"];

/// ` ?:` then ` ?` as in "NET/IB ?: ?": where the text after them starts (neither literal that
/// follows them in the patterns starts with a space, so taking each space when present is the
/// only way to a match).
fn opt_colon(h: &[u8], mut i: usize) -> Option<usize> {
    if i < h.len() && h[i] == b' ' {
        i += 1;
    }
    if i < h.len() && h[i] == b':' {
        i += 1;
        if i < h.len() && h[i] == b' ' {
            i += 1;
        }
        Some(i)
    } else {
        None
    }
}

fn any_lit(h: &[u8], at: usize, lits: &[&[u8]]) -> bool {
    lits.iter().any(|l| starts(h, at, l))
}

/// Does one of AGG's keys (`_AGG_KEYS`) match at `q` (just after "NCCL INFO ")?
pub fn agg_key(h: &[u8], q: usize) -> bool {
    let n = h.len();
    if q >= n {
        return false;
    }
    match h[q] {
        b'N' => {
            if starts(h, q, b"NCCL_") {
                // NCCL_[A-Z0-9_]+ set
                let e = run(h, q + 5, |b| b.is_ascii_uppercase() || is_digit(b) || b == b'_');
                return e > q + 5 && starts(h, e, b" set ");
            }
            if starts(h, q, b"NVLS multicast") {
                return true;
            }
            if !starts(h, q, b"NET/") {
                return false;
            }
            let a = q + 4;
            // /IB ?: ?(?:GPU Direct|\[\d|Made virtual|ncclIbConnect|NCCL Dev|Data Direct)
            if starts(h, a, b"IB") {
                if let Some(i) = opt_colon(h, a + 2) {
                    if any_lit(h, i, &[b"GPU Direct", b"Made virtual", b"ncclIbConnect", b"NCCL Dev", b"Data Direct"])
                        || (starts(h, i, b"[") && i + 1 < n && is_digit(h[i + 1]))
                    {
                        return true;
                    }
                }
            }
            // /Plugin ?: ?(?![ F]): after the colon, one optional space, then neither a space nor an F
            if starts(h, a, b"Plugin") {
                let mut i = a + 6;
                if i < n && h[i] == b' ' {
                    i += 1;
                }
                if i < n && h[i] == b':' {
                    let j = i + 1;
                    let ok = |k: usize| k >= n || (h[k] != b' ' && h[k] != b'F');
                    if (j < n && h[j] == b' ' && ok(j + 1)) || ok(j) {
                        return true;
                    }
                }
            }
            if starts(h, a, b"OFI ") {
                return true;
            }
            // /(?!IB|Plugin|Socket)[^:\r\n]{1,40}: GPU Direct
            if !any_lit(h, a, &[b"IB", b"Plugin", b"Socket"]) {
                let mut i = a;
                while i < n && i - a <= 40 && !matches!(h[i], b':' | b'\r' | b'\n') {
                    i += 1;
                }
                let l = i - a;
                if (1..=40).contains(&l) && starts(h, i, b": GPU Direct") {
                    return true;
                }
            }
            // /IBext\w{0,8} ?: GPU Direct
            if starts(h, a, b"IBext") {
                let w = run(h, a + 5, is_word);
                if w - (a + 5) <= 8 {
                    let mut i = w;
                    if i < n && h[i] == b' ' {
                        i += 1;
                    }
                    if starts(h, i, b": GPU Direct") {
                        return true;
                    }
                }
            }
            false
        }
        b'c' => starts(h, q, b"cudaDriverVersion"),
        b'G' => starts(h, q, b"GPU Direct RDMA"),
        b'I' => starts(h, q, b"Initialized NET plugin"),
        b'S' => starts(h, q, b"Successfully loaded external") || coll_bytes(h, q),
        b'P' => {
            if starts(h, q, b"Plugin Path") || starts(h, q, b"P2P plugin") {
                return true;
            }
            if starts(h, q, b"Pattern ") {
                let e = run(h, q + 8, is_digit);
                return e > q + 8 && starts(h, e, b", crossNic");
            }
            false
        }
        b'D' => starts(h, q, b"DMA-BUF is available"),
        b'E' => starts(h, q, b"Enabled NCCL Func"),
        b'C' => {
            if starts(h, q, b"Connected all rings") {
                return true;
            }
            if starts(h, q, b"Channel ") {
                // Channel \d+/\d\d :
                let e = run(h, q + 8, is_digit);
                return e > q + 8
                    && starts(h, e, b"/")
                    && e + 2 < n
                    && is_digit(h[e + 1])
                    && is_digit(h[e + 2])
                    && starts(h, e + 3, b" : ");
            }
            false
        }
        b'0'..=b'9' => {
            let e = run(h, q, is_digit);
            starts(h, e, b" Bytes -> Algo") || starts(h, e, b" coll channels")
        }
        _ => coll_bytes(h, q),
    }
}

/// `(?:All(?:Reduce|Gather|ToAll)|Reduce(?:Scatter)?|Broadcast|Send(?:Recv)?|Recv|Gather|Scatter): \d+ Bytes`
fn coll_bytes(h: &[u8], q: usize) -> bool {
    if q >= h.len() || !matches!(h[q], b'A' | b'R' | b'B' | b'S' | b'G') {
        return false;
    }
    COLLS.iter().any(|c| {
        if !starts(h, q, c) || !starts(h, q + c.len(), b": ") {
            return false;
        }
        let d = q + c.len() + 2;
        let e = run(h, d, is_digit);
        e > d && starts(h, e, b" Bytes")
    })
}

/// `AGG.findall(h)` as (start, end) of each message, in order.
pub fn agg_all(h: &[u8], out: impl FnMut(usize, usize)) {
    both(h, out, |_| {});
}

/// AGG's matches and SCAN's match starts in one pass over the block's 'L's: every "NCCL INFO " that AGG
/// matches has its 'L' at +3, and every SCAN match starts at an 'L'.
pub fn both(h: &[u8], mut agg: impl FnMut(usize, usize), mut scan: impl FnMut(usize)) {
    let mut pos = 0; // AGG's next match starts here or later
    each_byte(h, b'L', 0, |p| {
        // nearly every 'L' is the end of "NCCL INFO ": its " INFO " is compared once, for both patterns
        // (scan_at's "L INFO " branch is rank_key at the message)
        if !h[p + 1..].starts_with(b" INFO ") {
            if scan_at(h, p) {
                scan(p);
            }
            return;
        }
        if rank_key(h, p + 7) {
            scan(p);
        }
        if p < 3 {
            return;
        }
        let at = p - 3;
        if at >= pos && &h[at..p] == b"NCC" && agg_key(h, p + 7) {
            let e = line_end(h, p + 7);
            agg(p + 7, e);
            pos = e;
        }
    });
}

// ---------------------------------------------------------------- SCAN

/// `[a-z][\w./+-]*\.(?:cc|cu|c|h|cpp|hpp):\d+ ` at `q`: everything before the colon is in the run's
/// class, so the colon is where the run ends, and the run must end in one of the extensions.
fn source_line(h: &[u8], q: usize) -> bool {
    if q >= h.len() || !h[q].is_ascii_lowercase() {
        return false;
    }
    let e = run(h, q + 1, |b| is_word(b) || matches!(b, b'.' | b'/' | b'+' | b'-'));
    if !starts(h, e, b":") {
        return false;
    }
    let tok = &h[q + 1..e]; // the part after [a-z]: it holds the extension's dot
    let ext_ok = [&b".cc"[..], b".cu", b".c", b".h", b".cpp", b".hpp"].iter().any(|x| tok.ends_with(x));
    if !ext_ok {
        return false;
    }
    let d = run(h, e + 1, is_digit);
    d > e + 1 && starts(h, d, b" ")
}

/// Does one of `_RANK_KEYS` match at `q` (just after "L INFO ")?
fn rank_key(h: &[u8], q: usize) -> bool {
    let n = h.len();
    if q >= n {
        return false;
    }
    match h[q] {
        b'N' => {
            if starts(h, q, b"NCCL version ") || starts(h, q, b"NET : Using interface") {
                return true;
            }
            if starts(h, q, b"NET/IB") {
                if let Some(i) = opt_colon(h, q + 6) {
                    if any_lit(h, i, &[b"Using", b"No ", b"Unable", b"Failed"]) {
                        return true;
                    }
                }
            }
            if starts(h, q, b"NET/Socket") {
                let mut i = q + 10;
                if i < n && h[i] == b' ' {
                    i += 1;
                }
                if starts(h, i, b": ") && any_lit(h, i + 2, &[b"Using [", b"No ", b"no "]) {
                    return true;
                }
            }
            false
        }
        b'B' => {
            if !starts(h, q, b"Bootstrap") {
                return false;
            }
            let mut i = q + 9;
            if i < n && h[i] == b' ' {
                i += 1;
            }
            starts(h, i, b": Using")
        }
        b'c' => starts(h, q, b"comm 0x") || starts(h, q, b"comm (nil)") || source_line(h, q),
        b'U' => starts(h, q, b"Using network") || starts(h, q, b"Unrecognized"),
        b'I' => starts(h, q, b"Invalid"),
        b'A' => starts(h, q, b"Assigned NET plugin") || starts(h, q, b"All entries"),
        b'P' => starts(h, q, b"P2P is disabled"),
        b'E' => starts(h, q, b"Error"),
        b'C' => {
            if any_lit(h, q, &[b"Could not find a path", b"Could not find any", b"Could not find real path",
                              b"Cuda failure", b"Call to "]) {
                return true;
            }
            if starts(h, q, b"CUDA Dev ") {
                let e = run(h, q + 9, is_digit);
                return e > q + 9 && starts(h, e, b", IP");
            }
            false
        }
        b'H' => starts(h, q, b"HINT"),
        b'F' => starts(h, q, b"Failed to "),
        b'[' => {
            if !starts(h, q, b"[Rank ") {
                return false;
            }
            let e = run(h, q + 6, is_digit);
            e > q + 6 && starts(h, e, b"] nccl")
        }
        b'n' => {
            if starts(h, q, b"nccl") {
                let e = run(h, q + 4, is_word);
                if e > q + 4 && starts(h, e, b" comm ") {
                    return true;
                }
            }
            source_line(h, q)
        }
        b'a'..=b'z' => source_line(h, q),
        _ => false,
    }
}

/// Does SCAN match at `p` (an 'L')?
///
/// `L(?:ast error:| (?:WARN |INFO (?:_RANK_KEYS)|version \d|error|communicator)|\.cpp:\d+\]|\(SeqNum)`
#[inline]
pub fn scan_at(h: &[u8], p: usize) -> bool {
    let n = h.len();
    if p + 1 >= n {
        return false;
    }
    match h[p + 1] {
        b' ' => {
            let q = p + 2;
            if q >= n {
                return false;
            }
            match h[q] {
                b'I' => starts(h, q, b"INFO ") && rank_key(h, q + 5),
                b'W' => starts(h, q, b"WARN "),
                b'v' => starts(h, q, b"version ") && q + 8 < n && is_digit(h[q + 8]),
                b'e' => starts(h, q, b"error"),
                b'c' => starts(h, q, b"communicator"),
                _ => false,
            }
        }
        b'a' => starts(h, p + 1, b"ast error:"),
        b'.' => {
            if !starts(h, p + 1, b".cpp:") {
                return false;
            }
            let e = run(h, p + 6, is_digit);
            e > p + 6 && starts(h, e, b"]")
        }
        b'(' => starts(h, p + 1, b"(SeqNum"),
        _ => false,
    }
}

/// `SCAN.search(h, pos)`: where the next match starts.
#[inline]
pub fn scan_search(h: &[u8], mut pos: usize) -> Option<usize> {
    while let Some(p) = byte(h, b'L', pos, h.len()) {
        if scan_at(h, p) {
            return Some(p);
        }
        pos = p + 1;
    }
    None
}
