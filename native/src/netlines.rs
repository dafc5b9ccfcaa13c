//! The network message patterns of nccl_log_patterns (str patterns, read here on ASCII text only,
//! where `\w`, `\d`, `\S` mean what they mean on bytes): IFACE and IB_DEV, with `findall`'s results.

use crate::find::{is_digit, is_word, run};

/// str.isspace for ASCII (Python counts \x1c..\x1f as whitespace; so does `\s` of a str pattern).
#[inline]
pub fn py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1c..=0x1f)
}

/// str.strip() on ASCII.
pub fn strip(s: &[u8]) -> &[u8] {
    let a = s.iter().position(|&b| !py_space(b)).unwrap_or(s.len());
    let e = s.iter().rposition(|&b| !py_space(b)).map_or(a, |i| i + 1);
    &s[a..e.max(a)]
}

#[inline]
fn name_c(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'@' | b'-')
}

/// `IFACE.findall(s)`: `(?:\[\d+\])?(?<![A-Za-z0-9_.@\-])([A-Za-z0-9_.@\-]+):(\S+?)<(\d+)>` -> (name, addr).
pub fn ifaces(s: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        match iface_at(s, i) {
            Some((name, addr, end)) => {
                out.push((name, addr));
                i = end;
            }
            None => i += 1,
        }
    }
    out
}

fn iface_at(s: &[u8], i: usize) -> Option<(&[u8], &[u8], usize)> {
    // the optional "[N]" first (greedy), then without it
    if s[i] == b'[' {
        let d = run(s, i + 1, is_digit);
        if d > i + 1 && d < s.len() && s[d] == b']' {
            if let Some(m) = iface_name(s, d + 1) {
                return Some(m);
            }
        }
    }
    if i > 0 && name_c(s[i - 1]) {
        return None; // the lookbehind: a name starts where a run of name characters does
    }
    iface_name(s, i)
}

/// `([A-Za-z0-9_.@\-]+):(\S+?)<(\d+)>` at `i` (the lookbehind already holds).
fn iface_name(s: &[u8], i: usize) -> Option<(&[u8], &[u8], usize)> {
    let e = run(s, i, name_c);
    if e == i || e >= s.len() || s[e] != b':' {
        return None;
    }
    let a = e + 1;
    // the shortest run of non-space characters followed by "<digits>"
    let mut k = a + 1;
    while k <= s.len() && !py_space(s[k - 1]) {
        if k < s.len() && s[k] == b'<' {
            let d = run(s, k + 1, is_digit);
            if d > k + 1 && d < s.len() && s[d] == b'>' {
                return Some((&s[i..e], &s[a..k], d + 1));
            }
        }
        k += 1;
    }
    None
}

/// `IB_DEV.findall(s)`: `\[(\d+)\] ?([\w.\-]+):(\d+)(?::-?\d*){0,2}/(\w+)` -> (idx, dev, port, link).
#[allow(clippy::type_complexity)]
pub fn ib_devs(s: &[u8]) -> Vec<(&[u8], &[u8], &[u8], &[u8])> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        match ib_dev_at(s, i) {
            Some((m, end)) => {
                out.push(m);
                i = end;
            }
            None => i += 1,
        }
    }
    out
}

#[allow(clippy::type_complexity)]
fn ib_dev_at(s: &[u8], i: usize) -> Option<((&[u8], &[u8], &[u8], &[u8]), usize)> {
    if s[i] != b'[' {
        return None;
    }
    let d = run(s, i + 1, is_digit);
    if d == i + 1 || d >= s.len() || s[d] != b']' {
        return None;
    }
    let mut n = d + 1;
    if n < s.len() && s[n] == b' ' {
        n += 1;
    }
    let ne = run(s, n, |b| is_word(b) || b == b'.' || b == b'-');
    if ne == n || ne >= s.len() || s[ne] != b':' {
        return None;
    }
    let pe = run(s, ne + 1, is_digit);
    if pe == ne + 1 {
        return None;
    }
    let mut j = pe;
    for _ in 0..2 {
        if j < s.len() && s[j] == b':' {
            let mut k = j + 1;
            if k < s.len() && s[k] == b'-' {
                k += 1;
            }
            j = run(s, k, is_digit);
        } else {
            break;
        }
    }
    if j >= s.len() || s[j] != b'/' {
        return None;
    }
    let le = run(s, j + 1, is_word);
    if le == j + 1 {
        return None;
    }
    Some(((&s[i + 1..d], &s[n..ne], &s[ne + 1..pe], &s[j + 1..le]), le))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iface_shapes() {
        assert_eq!(ifaces(b"enp25s0np0:10.0.0.1<0>"), vec![(&b"enp25s0np0"[..], &b"10.0.0.1"[..])]);
        assert_eq!(ifaces(b"[0]ib0:fe80::1%ib0<0> [1]eth0:1.2.3.4<0>").len(), 2);
        assert_eq!(ifaces(b"a:b<x>c<1>"), vec![(&b"a"[..], &b"b<x>c"[..])]);
        assert!(ifaces(b"a: b<1>").is_empty());
        assert_eq!(ib_devs(b"[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]").len(), 2);
        assert_eq!(ib_devs(b"[0] mlx5_0:1:-1:3/IB")[0].3, b"IB");
    }
}

// ---------------------------------------------------------------- line prefixes (nccl_log_patterns)

/// The fields of nccl_log_patterns.Prefix read from the text before "NCCL INFO|WARN".
#[derive(Debug, Default, PartialEq)]
pub struct PrefixFields<'a> {
    pub host: Option<&'a [u8]>,
    pub pid: Option<&'a [u8]>,
    pub tid: Option<&'a [u8]>,
    pub dev: Option<i64>,
    pub file: Option<&'a [u8]>,
    pub func: Option<&'a [u8]>,
}

/// str.rstrip() on ASCII.
fn rstrip(s: &[u8]) -> &[u8] {
    &s[..s.iter().rposition(|&b| !py_space(b)).map_or(0, |i| i + 1)]
}

fn rfind(s: &[u8], pat: &[u8]) -> Option<usize> {
    crate::find::rsub(s, pat, 0, s.len())
}

fn digits_only(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|b| b.is_ascii_digit())
}

/// `_SRC_FILE.match`: `^[\w./+-]+\.(?:cc|cu|c|h|cpp|hpp|cxx|py):(\d+)$`.
fn src_file(last: &[u8]) -> bool {
    let Some(c) = last.iter().position(|&b| b == b':') else { return false };
    let (a, d) = (&last[..c], &last[c + 1..]);
    digits_only(d)
        && a.iter().all(|&b| is_word(b) || matches!(b, b'.' | b'/' | b'+' | b'-'))
        && [&b".cc"[..], b".cu", b".c", b".h", b".cpp", b".hpp", b".cxx", b".py"]
            .iter()
            .any(|x| a.len() > x.len() && a.ends_with(x))
}

/// `_FUNC_LINE.match`: `^[A-Za-z_]\w*:\d+$`.
fn func_line(last: &[u8]) -> bool {
    let Some(c) = last.iter().position(|&b| b == b':') else { return false };
    let (a, d) = (&last[..c], &last[c + 1..]);
    !a.is_empty() && (a[0].is_ascii_alphabetic() || a[0] == b'_') && a.iter().all(|&b| is_word(b)) && digits_only(d)
}

/// `_DEV_END.search(s)`: `\[\d+\]$`.
fn dev_end(s: &[u8]) -> bool {
    if !s.ends_with(b"]") {
        return false;
    }
    let body = &s[..s.len() - 1];
    let d = body.iter().rposition(|b| !b.is_ascii_digit()).map_or(0, |i| i + 1);
    d < body.len() && d > 0 && body[d - 1] == b'['
}

/// `_ID.match`: `^[A-Za-z0-9_.\-]+(?::[\w\-]+){0,2}$`.
fn id_ok(t: &[u8]) -> bool {
    let parts: Vec<&[u8]> = t.split(|&b| b == b':').collect();
    parts.len() <= 3
        && !parts[0].is_empty()
        && parts[0].iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && parts[1..].iter().all(|p| !p.is_empty() && p.iter().all(|&b| is_word(b) || b == b'-'))
}

/// nccl_log_patterns.parse_prefix_long on ASCII text; None when Python must read it (not ASCII, or a
/// device number too long for an i64).
pub fn long_prefix(raw: &[u8]) -> Option<PrefixFields<'_>> {
    if !raw.iter().all(|&b| b < 0x80) {
        return None;
    }
    let mut f = PrefixFields::default();
    let mut text = rstrip(raw);
    if text.ends_with(b")") {
        if let Some(i) = rfind(text, b" (") {
            f.func = Some(&text[i + 2..text.len() - 1]);
            text = rstrip(&text[..i]);
        }
    }
    if !text.is_empty() {
        let j = text.iter().rposition(|&b| b == b' ');
        let last = j.map_or(text, |j| &text[j + 1..]);
        if src_file(last) || (func_line(last) && dev_end(&text[..j.unwrap_or(0)])) {
            f.file = Some(last);
            text = j.map_or(&b""[..], |j| rstrip(&text[..j + 1]));
        }
    }
    if text.ends_with(b"]") {
        if let Some(k) = text.iter().rposition(|&b| b == b'[') {
            let d = &text[k + 1..text.len() - 1];
            if digits_only(d) {
                if d.len() > 18 {
                    return None;
                }
                f.dev = std::str::from_utf8(d).ok()?.parse().ok();
                text = rstrip(&text[..k]);
            }
        }
    }
    let mut token = text.iter().rposition(|&b| b == b' ').map_or(text, |i| &text[i + 1..]);
    for tag in [&b">:"[..], b"]:"] {
        if let Some(c) = rfind(token, tag) {
            token = &token[c + 2..];
        }
    }
    if token.is_empty() || !id_ok(token) {
        return Some(f);
    }
    let mut parts = token.split(|&b| b == b':');
    let host = parts.next()?;
    let (pid, tid) = (parts.next(), parts.next());
    if digits_only(host) && pid.is_none() {
        return Some(f);
    }
    f.host = Some(host);
    f.pid = pid;
    f.tid = tid;
    Some(f)
}
