//! The one pickle avaprep writes: mmaction2's proposals, a dict of float64 numpy arrays, in
//! pickle protocol 3 as `pickle.dumps` writes it for numpy 1.x (numpy 2 loads that spelling too).

use std::collections::BTreeMap;

const PROTO_3: &[u8] = b"\x80\x03";
const EMPTY_DICT: u8 = b'}';
const MARK: u8 = b'(';
const SET_ITEMS: u8 = b'u';
const TUPLE: u8 = b't';
const TUPLE_1: u8 = 0x85;
const TUPLE_2: u8 = 0x86;
const TUPLE_3: u8 = 0x87;
const REDUCE: u8 = b'R';
const BUILD: u8 = b'b';
const NONE: u8 = b'N';
const NEW_TRUE: u8 = 0x88;
const NEW_FALSE: u8 = 0x89;
const STOP: u8 = b'.';

/// `{key: array of rows}`, each array `rows x N` of little-endian float64.
pub fn dict_of_arrays<const N: usize>(arrays: &BTreeMap<String, Vec<[f64; N]>>) -> Vec<u8> {
    let mut out = PROTO_3.to_vec();
    out.push(EMPTY_DICT);
    if !arrays.is_empty() {
        out.push(MARK);
        for (key, rows) in arrays {
            unicode(&mut out, key);
            array(&mut out, rows);
        }
        out.push(SET_ITEMS);
    }
    out.push(STOP);
    out
}

/// `numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b')` with the state
/// `(1, shape, dtype('<f8'), False, data)`.
fn array<const N: usize>(out: &mut Vec<u8>, rows: &[[f64; N]]) {
    global(out, "numpy.core.multiarray", "_reconstruct");
    global(out, "numpy", "ndarray");
    int(out, 0);
    out.push(TUPLE_1);
    short_bytes(out, b"b");
    out.push(TUPLE_3);
    out.push(REDUCE);
    out.push(MARK);
    int(out, 1);
    int(out, rows.len() as i32);
    int(out, N as i32);
    out.push(TUPLE_2);
    float64_dtype(out);
    out.push(NEW_FALSE);
    let data: Vec<u8> = rows
        .iter()
        .flatten()
        .flat_map(|value| value.to_le_bytes())
        .collect();
    bytes(out, &data);
    out.push(TUPLE);
    out.push(BUILD);
}

/// `numpy.dtype('f8', False, True)` with the state `(3, '<', None, None, None, -1, -1, 0)`.
fn float64_dtype(out: &mut Vec<u8>) {
    global(out, "numpy", "dtype");
    unicode(out, "f8");
    out.push(NEW_FALSE);
    out.push(NEW_TRUE);
    out.push(TUPLE_3);
    out.push(REDUCE);
    out.push(MARK);
    int(out, 3);
    unicode(out, "<");
    out.extend([NONE, NONE, NONE]);
    int(out, -1);
    int(out, -1);
    int(out, 0);
    out.push(TUPLE);
    out.push(BUILD);
}

fn global(out: &mut Vec<u8>, module: &str, name: &str) {
    out.push(b'c');
    out.extend_from_slice(format!("{module}\n{name}\n").as_bytes());
}

fn int(out: &mut Vec<u8>, value: i32) {
    match u8::try_from(value) {
        Ok(small) => out.extend([b'K', small]),
        Err(_) => {
            out.push(b'J');
            out.extend(value.to_le_bytes());
        }
    }
}

fn unicode(out: &mut Vec<u8>, text: &str) {
    out.push(b'X');
    out.extend((text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

fn short_bytes(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'C');
    out.push(data.len() as u8);
    out.extend_from_slice(data);
}

fn bytes(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'B');
    out.extend((data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes Python 3.11's `pickle.dumps({'v,0902': numpy.array([[...]])}, protocol=3)`
    /// writes with numpy 1.x, less its memo opcodes (`q` n), which a reader does not need.
    #[test]
    fn one_array_pickles_as_numpy_does() {
        let mut arrays = BTreeMap::new();
        arrays.insert("v,0902".to_string(), vec![[0.5, 0.25, 1.0, 0.75, 0.9]]);
        let mut expected = b"\x80\x03}(X\x06\x00\x00\x00v,0902".to_vec();
        expected.extend_from_slice(
            b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R(K\x01K\x01K\x05\x86",
        );
        expected.extend_from_slice(b"cnumpy\ndtype\nX\x02\x00\x00\x00f8\x89\x88\x87R");
        expected.extend_from_slice(
            b"(K\x03X\x01\x00\x00\x00<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb",
        );
        expected.extend_from_slice(b"\x89B\x28\x00\x00\x00");
        for value in [0.5f64, 0.25, 1.0, 0.75, 0.9] {
            expected.extend_from_slice(&value.to_le_bytes());
        }
        expected.extend_from_slice(b"tbu.");
        assert_eq!(dict_of_arrays(&arrays), expected);
    }

    #[test]
    fn an_empty_dict_is_three_opcodes() {
        let arrays: BTreeMap<String, Vec<[f64; 5]>> = BTreeMap::new();
        assert_eq!(dict_of_arrays(&arrays), b"\x80\x03}.");
    }
}
