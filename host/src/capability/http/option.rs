//! The `http-option` capability kind: a provider may reach the origin of
//! the URL one of its config options holds (a cloud API's base URL, which
//! the user may point at a proxy or a local mock). Pure: resolved per
//! sandbox from the options the user gave.

use super::policy::Origin;

/// The origin granted by `http-option: <option>`: that of the URL in the
/// user's `option`, else in the option's declared default. None when
/// neither is set (nothing is granted).
pub fn origin_of_option(
    option: &str,
    config: &[(String, String)],
    default: Option<&str>,
) -> Result<Option<Origin>, String> {
    let given = config
        .iter()
        .rev()
        .find(|(k, _)| k == option)
        .map(|(_, v)| v.as_str());
    let Some(url) = given.or(default).map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        format!("option `{option}`: `{url}` is not a URL (expected https://host[:port][/path])")
    })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    Origin::parse(&format!("{scheme}://{authority}"))
        .map(Some)
        .map_err(|e| format!("option `{option}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The options given, the option's default, the origin granted.
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, Option<&'a str>);

    #[test]
    fn the_option_or_its_default_names_the_origin() {
        let default = Some("https://vercel.com/api");
        let cases: &[Case] = &[
            (&[], default, Some("https://vercel.com")),
            (
                &[("api-url", "http://127.0.0.1:4567")],
                default,
                Some("http://127.0.0.1:4567"),
            ),
            (
                &[("api-url", "https://proxy.example.com:8443/v/api?x=1")],
                default,
                Some("https://proxy.example.com:8443"),
            ),
            (
                &[("other", "https://x.example")],
                default,
                Some("https://vercel.com"),
            ),
            (&[], None, None),
            (&[("api-url", " ")], None, None),
        ];
        for (config, default, want) in cases {
            let got = origin_of_option("api-url", &cfg(config), *default).unwrap();
            assert_eq!(got.map(|o| o.to_string()).as_deref(), *want, "{config:?}");
        }
    }

    #[test]
    fn a_url_the_policy_refuses_names_the_option() {
        for url in [
            "http://api.example.com",
            "ftp://x",
            "vercel.com/api",
            "https://user@x.example",
        ] {
            let e = origin_of_option("api-url", &cfg(&[("api-url", url)]), None).unwrap_err();
            assert!(e.contains("option `api-url`"), "{url}: {e}");
        }
    }
}
