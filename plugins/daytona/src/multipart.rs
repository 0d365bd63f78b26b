//! The body of `POST /files/bulk-upload`: `multipart/form-data` with, for
//! file i, a field `files[i].path` (the destination in the sandbox) and a
//! field `files[i].file` (the bytes), in that order.

/// A boundary that cannot occur in the parts: it is checked against them.
fn boundary(parts: &[(&str, &[u8])]) -> String {
    let mut n: u64 = 0x5a4d_6479_746f_6e61;
    loop {
        let b = format!("sanddune-{n:016x}");
        let needle = b.as_bytes();
        let clashes = parts.iter().any(|(p, d)| {
            p.as_bytes().windows(needle.len()).any(|w| w == needle)
                || d.windows(needle.len()).any(|w| w == needle)
        });
        if !clashes {
            return b;
        }
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
}

/// (content-type, body) for uploading `files` (destination, bytes).
pub fn upload_body(files: &[(&str, &[u8])]) -> (String, Vec<u8>) {
    let b = boundary(files);
    let mut body = Vec::new();
    for (i, (path, data)) in files.iter().enumerate() {
        let name = path.replace(['"', '\r', '\n'], "_");
        body.extend(
            format!(
                "--{b}\r\ncontent-disposition: form-data; name=\"files[{i}].path\"\r\n\r\n{path}\r\n"
            )
            .as_bytes(),
        );
        body.extend(
            format!(
                "--{b}\r\ncontent-disposition: form-data; name=\"files[{i}].file\"; filename=\"{name}\"\r\ncontent-type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(data);
        body.extend(b"\r\n");
    }
    body.extend(format!("--{b}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={b}"), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_is_a_path_field_then_a_file_field() {
        let (ct, body) = upload_body(&[("/a/b.txt", b"hello"), ("/c", b"")]);
        let b = ct.strip_prefix("multipart/form-data; boundary=").unwrap();
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with(&format!("--{b}\r\n")));
        assert!(text.ends_with(&format!("--{b}--\r\n")));
        let p0 = text
            .find("name=\"files[0].path\"\r\n\r\n/a/b.txt\r\n")
            .unwrap();
        let f0 = text
            .find("name=\"files[0].file\"; filename=\"/a/b.txt\"")
            .unwrap();
        let p1 = text.find("name=\"files[1].path\"\r\n\r\n/c\r\n").unwrap();
        assert!(p0 < f0 && f0 < p1);
        assert!(text.contains("\r\n\r\nhello\r\n--"));
    }

    #[test]
    fn the_boundary_never_occurs_in_the_data() {
        let first = boundary(&[]);
        let data = format!("x{first}y");
        let (ct, _) = upload_body(&[("/f", data.as_bytes())]);
        assert!(!ct.ends_with(&first));
    }
}
