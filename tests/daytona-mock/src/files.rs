//! The toolbox's file calls: work and home dirs, bulk upload (multipart),
//! download (one file, or several as a multipart answer), folders, delete.
//! Paths are real host paths under the mock sandbox's directory; others
//! are refused.

use std::path::{Component, Path, PathBuf};

use hyper::Response;
use serde_json::{Value, json};

use crate::Shared;
use crate::server::{Body, Req, empty, full, ok, toolbox_error};

fn err(r: &Req, status: u16, code: &str, message: &str) -> Response<Body> {
    toolbox_error(status, &r.method, &r.path, code, message)
}

/// (root, home) of sandbox `id`.
fn dirs(state: &Shared, id: &str) -> (PathBuf, PathBuf) {
    let st = state.lock().unwrap();
    let sb = st
        .sandboxes
        .iter()
        .find(|s| s.id == id && !s.deleted)
        .expect("checked by the router");
    (sb.root_path.clone(), sb.home.clone())
}

/// `path` (absolute, or relative to the home) as a host path, when it is
/// inside the sandbox's directory.
fn resolve(state: &Shared, id: &str, path: &str) -> Option<PathBuf> {
    let (root, home) = dirs(state, id);
    let mut clean = PathBuf::new();
    for c in home.join(path).components() {
        match c {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    clean.starts_with(&root).then_some(clean)
}

fn outside(r: &Req, path: &str) -> Response<Body> {
    err(
        r,
        400,
        "INVALID_FILE_PATH",
        &format!("invalid file path: {path} is outside this mock sandbox"),
    )
}

pub(crate) fn home(state: &Shared, id: &str) -> Response<Body> {
    let (_, home) = dirs(state, id);
    ok(200, json!({ "dir": home.display().to_string() }))
}

/// The parts of a `multipart/form-data` body: (field name, bytes).
fn parts(content_type: &str, body: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))?
        .trim_matches('"');
    let delim = format!("--{boundary}").into_bytes();
    let find = |hay: &[u8], needle: &[u8], from: usize| {
        hay[from..]
            .windows(needle.len())
            .position(|w| w == needle)
            .map(|i| i + from)
    };
    let mut out = Vec::new();
    let mut at = find(body, &delim, 0)? + delim.len();
    loop {
        if body[at..].starts_with(b"--") {
            return Some(out);
        }
        let head_start = at + 2; // CRLF after the delimiter
        let head_end = find(body, b"\r\n\r\n", head_start)?;
        let head = String::from_utf8_lossy(&body[head_start..head_end]).to_string();
        let data_start = head_end + 4;
        let mut end_delim = b"\r\n".to_vec();
        end_delim.extend_from_slice(&delim);
        let data_end = find(body, &end_delim, data_start)?;
        let name = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition"))
            .and_then(|l| l.split(';').find_map(|p| p.trim().strip_prefix("name=")))
            .map(|n| n.trim_matches('"').to_string())?;
        out.push((name, body[data_start..data_end].to_vec()));
        at = data_end + end_delim.len();
    }
}

/// `files[N].path` then `files[N].file`: each file to its path, parents
/// created. Answers `{files: [{path, bytes}]}`, or 400 with `errors`.
pub(crate) fn upload(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let Some(parts) = r
        .content_type
        .as_deref()
        .filter(|c| c.starts_with("multipart/form-data"))
        .and_then(|c| parts(c, &r.body))
    else {
        return ok(400, json!({ "errors": ["invalid multipart form"] }));
    };
    let mut dests = std::collections::BTreeMap::new();
    let (mut files, mut errors) = (vec![], vec![]);
    for (name, data) in parts {
        let index = name
            .strip_prefix("files[")
            .and_then(|n| n.split_once(']'))
            .map(|(i, _)| i.to_string());
        let Some(index) = index else { continue };
        if name.ends_with(".path") {
            dests.insert(index, String::from_utf8_lossy(&data).trim().to_string());
        } else if name.ends_with(".file") {
            let Some(dest) = dests.get(&index) else {
                errors.push(format!("file[{index}]: missing .path metadata"));
                continue;
            };
            let Some(full) = resolve(state, id, dest) else {
                errors.push(format!("{dest}: outside this mock sandbox"));
                continue;
            };
            if let Some(parent) = full.parent()
                && let Err(e) = std::fs::create_dir_all(parent)
            {
                errors.push(format!("{dest}: mkdir: {e}"));
                continue;
            }
            match std::fs::write(&full, &data) {
                Ok(()) => files.push(json!({ "path": dest, "bytes": data.len() })),
                Err(e) => errors.push(format!("{dest}: create: {e}")),
            }
        }
    }
    if !errors.is_empty() {
        return ok(400, json!({ "errors": errors, "files": files }));
    }
    ok(200, json!({ "files": files }))
}

fn open(state: &Shared, id: &str, path: &str) -> Result<Vec<u8>, (u16, &'static str, String)> {
    let full = resolve(state, id, path).ok_or((
        400,
        "INVALID_FILE_PATH",
        format!("invalid file path: {path} is outside this mock sandbox"),
    ))?;
    if full.is_dir() {
        return Err((
            400,
            "INVALID_FILE_PATH",
            format!("invalid file path: path points to a directory: {path}"),
        ));
    }
    std::fs::read(&full).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => (404, "FILE_NOT_FOUND", format!("file not found: {path}")),
        _ => (500, "FILE_READ_FAILED", format!("failed to open file: {e}")),
    })
}

pub(crate) fn download(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let Some(path) = r.query.get("path").filter(|p| !p.is_empty()) else {
        return err(r, 400, "BAD_REQUEST", "path is required");
    };
    match open(state, id, path) {
        Ok(data) => {
            let mut resp = full(200, "application/octet-stream", data);
            let name = Path::new(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            resp.headers_mut().insert(
                "content-disposition",
                format!("attachment; filename=\"{name}\"").parse().unwrap(),
            );
            resp
        }
        Err((status, code, message)) => err(r, status, code, &message),
    }
}

const BOUNDARY: &str = "DAYTONA-FILE-BOUNDARY";

/// `{paths}` -> one multipart part per path: `file` with the bytes, or
/// `error` with the error as JSON.
pub(crate) fn bulk_download(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let paths: Vec<String> = r.json()["paths"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if paths.is_empty() {
        return ok(
            400,
            json!({ "error": "request body must be {\"paths\": [ ... ]} and non-empty" }),
        );
    }
    let mut body = Vec::new();
    for path in &paths {
        let disposition = |name: &str| {
            format!(
                "form-data; name=\"{name}\"; filename=\"{path}\"; filename*=utf-8''{}",
                path.bytes()
                    .map(
                        |b| if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                            (b as char).to_string()
                        } else {
                            format!("%{b:02X}")
                        }
                    )
                    .collect::<String>()
            )
        };
        body.extend(format!("--{BOUNDARY}\r\n").as_bytes());
        match open(state, id, path) {
            Ok(data) => {
                body.extend(
                    format!(
                        "Content-Disposition: {}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\n\r\n",
                        disposition("file"),
                        data.len()
                    )
                    .as_bytes(),
                );
                body.extend(data);
            }
            Err((status, code, message)) => {
                let e = json!({
                    "statusCode": status, "message": message, "code": code,
                    "timestamp": crate::server::now_iso(), "path": path, "method": r.method,
                });
                body.extend(
                    format!(
                        "Content-Disposition: {}\r\nContent-Type: application/json; charset=utf-8\r\n\r\n{e}",
                        disposition("error")
                    )
                    .as_bytes(),
                );
            }
        }
        body.extend(b"\r\n");
    }
    body.extend(format!("--{BOUNDARY}--\r\n").as_bytes());
    full(
        200,
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        body,
    )
}

pub(crate) fn folder(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let Some(path) = r.query.get("path").filter(|p| !p.is_empty()) else {
        return err(r, 400, "BAD_REQUEST", "path is required");
    };
    let Some(mode) = r
        .query
        .get("mode")
        .and_then(|m| u32::from_str_radix(m, 8).ok())
    else {
        return err(r, 400, "BAD_REQUEST", "invalid mode format");
    };
    let Some(full) = resolve(state, id, path) else {
        return outside(r, path);
    };
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(&full)
    {
        Ok(()) => empty(201),
        Err(e) => err(r, 400, "BAD_REQUEST", &e.to_string()),
    }
}

pub(crate) fn delete(state: &Shared, id: &str, r: &Req) -> Response<Body> {
    let Some(path) = r.query.get("path").filter(|p| !p.is_empty()) else {
        return err(r, 400, "BAD_REQUEST", "path is required");
    };
    let Some(full) = resolve(state, id, path) else {
        return outside(r, path);
    };
    let recursive = r.query.get("recursive").map(String::as_str) == Some("true");
    let result = match std::fs::symlink_metadata(&full) {
        Err(_) => return err(r, 404, "NOT_FOUND", &format!("file not found: {path}")),
        Ok(m) if m.is_dir() && recursive => std::fs::remove_dir_all(&full),
        Ok(m) if m.is_dir() => std::fs::remove_dir(&full),
        Ok(_) => std::fs::remove_file(&full),
    };
    match result {
        Ok(()) => empty(204),
        Err(e) => err(r, 400, "BAD_REQUEST", &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_parts_are_read_in_order() {
        let body = b"--XyZ\r\ncontent-disposition: form-data; name=\"files[0].path\"\r\n\r\n/a\r\n--XyZ\r\nContent-Disposition: form-data; name=\"files[0].file\"; filename=\"/a\"\r\ncontent-type: application/octet-stream\r\n\r\nhi\r\nthere\r\n--XyZ--\r\n";
        let p = parts("multipart/form-data; boundary=XyZ", body).unwrap();
        assert_eq!(
            p,
            vec![
                ("files[0].path".to_string(), b"/a".to_vec()),
                ("files[0].file".to_string(), b"hi\r\nthere".to_vec())
            ]
        );
    }
}
