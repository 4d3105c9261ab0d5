//! What the OpenAPI 3.1 document says beyond the handlers' `#[utoipa::path]` annotations (from
//! which `routes` builds the paths): the title, the authentication schemes, the reusable error
//! answers (`responses`), the data of the event stream's events, and that every object is closed
//! (no key beyond those listed).

use std::collections::BTreeMap;

use pruning_engine::{CompactedEventData, PrunedEventData};
use utoipa::openapi::schema::{AdditionalProperties, AllOf, ArrayItems, Object, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{OpenApi as Document, RefOr};
use utoipa::{Modify, OpenApi};

use super::error::ErrorBody;
use super::events::{HeartbeatData, ResyncData};
use super::responses::{
    BadRequest, BodyTimeout, Forbidden, Internal, NotFound, NotJson, TooLarge, Unauthorized,
};

/// The document's fixed part; the paths and the schemas they use are added by
/// `routes::routes`.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "session-prune",
        description = "Event-sourced pruning of tool output and reasoning from OpenCode session \
            databases. The session-pruning routes return exactly the shapes of CodeNomad's \
            session-pruning RPC. With a password set, every route needs it (bearer token, or \
            HTTP basic auth with it as the password). Errors are JSON: {error, field?}. String \
            lengths are counted in UTF-16 code units, as JavaScript counts them (a schema's \
            maxLength counts characters), and integers are written without a fraction (1, not \
            1.0): a request the schemas admit may still be refused on these two counts."
    ),
    modifiers(&Authentication),
    components(
        schemas(
            ErrorBody,
            PrunedEventData,
            CompactedEventData,
            HeartbeatData,
            ResyncData,
            crate::UpkeepRun
        ),
        responses(BadRequest, Unauthorized, Forbidden, NotFound, BodyTimeout, TooLarge, NotJson, Internal)
    )
)]
pub struct Fixed;

/// The two ways of sending the password, required on every route (when the server has one).
struct Authentication;

impl Modify for Authentication {
    fn modify(&self, openapi: &mut Document) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        components.add_security_scheme(
            "basic",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Basic)),
        );
        openapi.security = Some(vec![
            SecurityRequirement::new("bearer", Vec::<String>::new()),
            SecurityRequirement::new("basic", Vec::<String>::new()),
        ]);
    }
}

/// Every object the API sends or takes has exactly the keys its schema lists (CodeNomad's
/// client validates strictly: docs/ARCHITECTURE.md, "Contract"), so every object schema is
/// closed (`additionalProperties: false`). An `allOf` of objects (how serde's internally tagged
/// newtype variant is described: the page's keys beside `status`) becomes the one object it
/// stands for first, since a closed member of an `allOf` would refuse the other's keys.
pub(super) struct Closed;

impl Modify for Closed {
    fn modify(&self, openapi: &mut Document) {
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        let named = components.schemas.clone();
        for schema in components.schemas.values_mut() {
            close(schema, &named);
        }
    }
}

/// Closes `schema` and the schemas inside it; `named` resolves the references of an `allOf`.
fn close(schema: &mut RefOr<Schema>, named: &BTreeMap<String, RefOr<Schema>>) {
    let RefOr::T(schema) = schema else {
        return;
    };
    if let Schema::AllOf(all_of) = schema {
        if let Some(object) = merged(all_of, named) {
            *schema = Schema::Object(object);
        }
    }
    match schema {
        Schema::Object(object) => {
            if !object.properties.is_empty() && object.additional_properties.is_none() {
                object.additional_properties =
                    Some(Box::new(AdditionalProperties::FreeForm(false)));
            }
            for property in object.properties.values_mut() {
                close(property, named);
            }
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                close(items, named);
            }
        }
        Schema::OneOf(one_of) => {
            for item in &mut one_of.items {
                close(item, named);
            }
        }
        _ => {}
    }
}

/// The one object an `allOf` of objects (or references to them) stands for: every member's
/// properties and required keys; `None` when a member is anything else.
fn merged(all_of: &AllOf, named: &BTreeMap<String, RefOr<Schema>>) -> Option<Object> {
    let mut merged = Object::with_type(Type::Object);
    merged.description.clone_from(&all_of.description);
    for item in &all_of.items {
        let member = match item {
            RefOr::Ref(reference) => {
                let name = reference
                    .ref_location
                    .strip_prefix("#/components/schemas/")?;
                named.get(name)?
            }
            inline => inline,
        };
        let RefOr::T(Schema::Object(member)) = member else {
            return None;
        };
        for (key, property) in &member.properties {
            merged.properties.insert(key.clone(), property.clone());
        }
        merged.required.extend(member.required.iter().cloned());
    }
    Some(merged)
}
