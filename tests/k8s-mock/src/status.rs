//! The API server's `Status` bodies (`meta/v1 Status`), worded as the real
//! apiserver words them: clients print `message` and branch on `reason`.

use serde_json::{Value, json};

/// A failure: `code` with `reason`, `message` and `details`.
pub fn failure(code: u16, reason: &str, message: String, details: Option<Value>) -> Value {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

/// `pods "x" not found`, `namespaces "x" not found`.
pub fn not_found(resource: &str, name: &str) -> Value {
    failure(
        404,
        "NotFound",
        format!("{resource} \"{name}\" not found"),
        Some(json!({"name": name, "kind": resource})),
    )
}

pub fn already_exists(resource: &str, name: &str) -> Value {
    failure(
        409,
        "AlreadyExists",
        format!("{resource} \"{name}\" already exists"),
        Some(json!({"name": name, "kind": resource})),
    )
}

pub fn unauthorized() -> Value {
    failure(401, "Unauthorized", "Unauthorized".into(), None)
}

/// What the RBAC authorizer says, naming the object when there is one
/// (`pods "x" is forbidden: ...` for a get or an exec).
/// RBAC's refusal of `verb` on `resource` in API `group` ("" for the
/// core group), as the API server words it.
pub fn forbidden(
    user: &str,
    verb: &str,
    (group, resource): (&str, &str),
    subresource: Option<&str>,
    name: Option<&str>,
    namespace: &str,
) -> Value {
    let full = match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    let qualified = match group {
        "" => resource.to_string(),
        group => format!("{resource}.{group}"),
    };
    let subject = match name {
        Some(name) => format!("{qualified} \"{name}\""),
        None => qualified,
    };
    let mut details = json!({"kind": resource});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    if let Some(name) = name {
        details["name"] = json!(name);
    }
    failure(
        403,
        "Forbidden",
        format!(
            "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{full}\" in API group \"{group}\" in the namespace \"{namespace}\""
        ),
        Some(details),
    )
}

pub fn bad_request(message: String) -> Value {
    failure(400, "BadRequest", message, None)
}

pub fn invalid_pod(name: &str, message: String) -> Value {
    failure(
        422,
        "Invalid",
        format!("Pod \"{name}\" is invalid: {message}"),
        Some(json!({"name": name, "kind": "Pod"})),
    )
}

pub fn method_not_allowed() -> Value {
    failure(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource".into(),
        None,
    )
}

/// A path the server does not serve: the real one answers a bare 404
/// Status too.
pub fn no_route() -> Value {
    failure(
        404,
        "NotFound",
        "the server could not find the requested resource".into(),
        Some(json!({})),
    )
}

/// The exec's last word on the error channel: success, or the exit code
/// as a cause kubectl and the clients read it from.
pub fn exec_exit(code: i64, command: &[String]) -> Value {
    if code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
            command.join(" ")
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
    })
}

/// An exec that could not run at all (the container is gone).
pub fn exec_error(message: String) -> Value {
    json!({"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError", "code": 500})
}

/// The ResourceQuota admission's refusal of one pod too many.
pub fn quota_exceeded(name: &str, used: usize, limit: usize) -> Value {
    failure(
        403,
        "Forbidden",
        format!(
            "pods \"{name}\" is forbidden: exceeded quota: pod-quota, requested: pods=1, used: pods={used}, limited: pods={limit}"
        ),
        Some(json!({"name": name, "kind": "pods"})),
    )
}
