//! Answers checked against the OpenAPI document the server serves: an answer's status must be
//! one the document lists for its route, its content type one the document gives for that
//! status, and its body must validate (JSON Schema 2020-12) against the schema declared there,
//! `#/components/...` references resolved in the document itself.
#![allow(dead_code)]

use std::collections::BTreeSet;

use serde_json::Value;

use super::app::Answer;

/// The served document, and the answers checked against it.
pub struct Document {
    doc: Value,
    /// `(METHOD /template, status)` of every answer checked.
    checked: BTreeSet<(String, u16)>,
}

impl Document {
    /// Wraps the document (as `GET /openapi.json` answered it).
    pub fn new(doc: Value) -> Self {
        assert_eq!(doc["openapi"], "3.1.0", "an OpenAPI 3.1 document");
        Self {
            doc,
            checked: BTreeSet::new(),
        }
    }

    /// Every operation the document describes, as `METHOD /template`.
    pub fn routes(&self) -> BTreeSet<String> {
        let mut routes = BTreeSet::new();
        for (path, item) in self.doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("a path item").keys() {
                routes.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
        routes
    }

    /// Whether `route` is served without the password: its operation's `security` is `[{}]`
    /// (no requirement), where every other operation takes the document's.
    pub fn is_public(&self, route: &str) -> bool {
        self.operation(route)["security"] == serde_json::json!([{}])
    }

    /// Every `(METHOD /template, status)` the document lists.
    pub fn statuses(&self) -> BTreeSet<(String, u16)> {
        let mut statuses = BTreeSet::new();
        for route in self.routes() {
            for status in self.operation(&route)["responses"]
                .as_object()
                .expect("responses")
                .keys()
            {
                statuses.insert((route.clone(), status.parse().expect("a numeric status")));
            }
        }
        statuses
    }

    /// The answers checked so far, as `(METHOD /template, status)`.
    pub fn checked(&self) -> &BTreeSet<(String, u16)> {
        &self.checked
    }

    /// The operation `METHOD /template`; panics when the document lacks it.
    fn operation(&self, route: &str) -> &Value {
        let (method, path) = route.split_once(' ').expect("METHOD /path");
        let operation = &self.doc["paths"][path][method.to_lowercase()];
        assert!(operation.is_object(), "the document lacks {route}");
        operation
    }

    /// The schema the document declares for answers of `route` with `status` and
    /// `content_type`, recording the pair as checked. Panics when the document lacks the
    /// route, the status or the content type, or when the answer is the router's own "no such
    /// route" or "wrong method" (the document lists a route the router does not serve).
    pub fn schema_for(&mut self, route: &str, status: u16, content_type: &str) -> Value {
        assert_ne!(
            status, 405,
            "{route} is documented but not served with that method"
        );
        let mut response = &self.operation(route)["responses"][status.to_string()];
        assert!(
            response.is_object(),
            "{route} answered {status}, which the document does not list"
        );
        if let Some(reference) = response["$ref"].as_str() {
            let name = reference
                .strip_prefix("#/components/responses/")
                .expect("a response reference");
            response = &self.doc["components"]["responses"][name];
        }
        let media = content_type.split(';').next().unwrap_or("").trim();
        let schema = &response["content"][media]["schema"];
        assert!(
            schema.is_object(),
            "{route} {status} answered {media}, which the document does not give: {response}"
        );
        let schema = schema.clone();
        self.checked.insert((route.to_string(), status));
        schema
    }

    /// Checks a whole answer of `route` (see [`Document::schema_for`]); a JSON body is
    /// validated as JSON, any other as a string.
    pub fn check(&mut self, route: &str, answer: &Answer) {
        let content_type = answer
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let schema = self.schema_for(route, answer.status, content_type);
        let instance = if content_type.starts_with("application/json") {
            answer.json()
        } else {
            Value::String(answer.body.clone())
        };
        assert!(
            !(answer.status == 404 && answer.body.contains("no such route")),
            "{route} is documented but not served: {}",
            answer.body
        );
        if let Err(errors) = self.validate(&schema, &instance) {
            panic!(
                "{route} {}: the body breaks its schema {schema}:\n{errors}\nbody: {}",
                answer.status, answer.body
            );
        }
    }

    /// Validates `instance` against the component schema `name`.
    pub fn validate_named(&self, name: &str, instance: &Value) -> Result<(), String> {
        let schema = serde_json::json!({ "$ref": format!("#/components/schemas/{name}") });
        self.validate(&schema, instance)
    }

    /// Validates `instance` against `schema`, whose references point into the document.
    ///
    /// Errors: every violation, one a line.
    pub fn validate(&self, schema: &Value, instance: &Value) -> Result<(), String> {
        let mut root = schema.clone();
        root["components"] = self.doc["components"].clone();
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&root)
            .unwrap_or_else(|e| panic!("not a valid schema ({e}): {schema}"));
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }
}
