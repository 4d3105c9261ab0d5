//! Query strings: `key=value` pairs (`application/x-www-form-urlencoded`), with unknown and
//! repeated keys refused, as unknown body keys are.

use std::collections::HashMap;

use super::error::ApiError;

/// Parses `raw` (the part after `?`), accepting only the keys in `known`. Values are
/// percent-decoded; invalid UTF-8 becomes U+FFFD (and then matches nothing).
///
/// Errors: [`ApiError::BadParameter`] (400) for an unknown key or a key given twice.
pub fn parse(raw: Option<&str>, known: &[&str]) -> Result<HashMap<String, String>, ApiError> {
    let mut found = HashMap::new();
    for (key, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        let key = key.into_owned();
        if !known.contains(&key.as_str()) {
            let takes = if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            };
            return Err(ApiError::BadParameter {
                detail: format!("unknown query parameter `{key}`; this route takes {takes}"),
                field: key,
            });
        }
        if found.insert(key.clone(), value.into_owned()).is_some() {
            return Err(ApiError::BadParameter {
                detail: format!("query parameter `{key}` is given twice"),
                field: key,
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_are_decoded() {
        let found = parse(Some("sessionID=ses_a%2Fb+c"), &["sessionID"]).unwrap();
        assert_eq!(
            found.get("sessionID").map(String::as_str),
            Some("ses_a/b c")
        );
        assert!(parse(None, &["since"]).unwrap().is_empty());
    }

    #[test]
    fn unknown_and_repeated_keys_are_refused() {
        for (raw, field) in [("bogus=1", "bogus"), ("since=1&since=2", "since")] {
            let error = parse(Some(raw), &["since"]).unwrap_err();
            assert_eq!(error.field(), Some(field), "{raw}");
        }
    }
}
