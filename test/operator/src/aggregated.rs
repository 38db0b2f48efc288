//! The aggregated API (`--mode aggregated-api`): the group `gadgets.test.olmv1.dev` with one
//! cluster-scoped, read-only resource, `gadgets`, served in the versions the bundle names. The API
//! server proxies requests here through the APIService OLM made; each answer says which pod served
//! it, for which bundle and for whom. Pure: paths in, documents out.

use serde_json::{Value, json};

pub const GROUP: &str = "gadgets.test.olmv1.dev";
pub const RESOURCE: &str = "gadgets";
pub const KIND: &str = "Gadget";
/// The gadgets every version lists.
pub const GADGETS: [&str; 2] = ["first", "second"];
/// The resourceVersion of everything served: nothing ever changes.
const RESOURCE_VERSION: &str = "1";

/// What the server answers with, and who it says served it.
#[derive(Clone, Debug)]
pub struct GadgetApi {
    /// The versions served, in the order the bundle gave them; the last is preferred.
    pub versions: Vec<String>,
    /// The pod's name (`POD_NAME`).
    pub served_by: String,
    /// The bundle version this pod belongs to.
    pub bundle_version: String,
    /// When the process started (RFC 3339): every gadget's creationTimestamp.
    pub started: String,
}

/// A request the API knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /apis`
    Groups,
    /// `GET /apis/<group>`
    Group,
    /// `GET /apis/<group>/<version>`
    Resources(String),
    /// `GET /apis/<group>/<version>/gadgets`
    List(String),
    /// `GET /apis/<group>/<version>/gadgets/<name>`
    Get(String, String),
}

/// How a request is authorized: the API server's attributes for a SubjectAccessReview.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attributes {
    /// A discovery path (`nonResourceAttributes`, verb `get`).
    NonResource { path: String },
    /// The resource (`resourceAttributes`).
    Resource {
        verb: &'static str,
        version: String,
        name: Option<String>,
    },
}

/// An answer: HTTP status and JSON body.
pub type Answer = (u16, Value);

/// The route of `path`, or `None` when it is none of this API's.
pub fn route(path: &str) -> Option<Route> {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    match parts.as_slice() {
        ["apis"] => Some(Route::Groups),
        ["apis", GROUP] => Some(Route::Group),
        ["apis", GROUP, version] => Some(Route::Resources(version.to_string())),
        ["apis", GROUP, version, RESOURCE] => Some(Route::List(version.to_string())),
        ["apis", GROUP, version, RESOURCE, name] => Some(Route::Get(version.to_string(), name.to_string())),
        _ => None,
    }
}

/// What a request to `route` at `path` must be authorized for.
pub fn attributes(route: &Route, path: &str) -> Attributes {
    match route {
        Route::Groups | Route::Group | Route::Resources(_) => Attributes::NonResource {
            path: path.to_string(),
        },
        Route::List(version) => Attributes::Resource {
            verb: "list",
            version: version.clone(),
            name: None,
        },
        Route::Get(version, name) => Attributes::Resource {
            verb: "get",
            version: version.clone(),
            name: Some(name.clone()),
        },
    }
}

/// A `meta.k8s.io/v1` Status of a failed request.
pub fn status(code: u16, reason: &str, message: &str) -> Answer {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

/// The API server's wording of a refusal.
pub fn forbidden(user: &str, attributes: &Attributes, why: &str) -> Answer {
    let message = match attributes {
        Attributes::NonResource { path } => {
            format!("forbidden: User {user:?} cannot get path {path:?}")
        }
        Attributes::Resource { verb, name, .. } => {
            let object = match name {
                Some(n) => format!("{RESOURCE}.{GROUP} {n:?}"),
                None => format!("{RESOURCE}.{GROUP}"),
            };
            format!(
                "{object} is forbidden: User {user:?} cannot {verb} resource {RESOURCE:?} in API group {GROUP:?} at the cluster scope"
            )
        }
    };
    let message = if why.is_empty() {
        message
    } else {
        format!("{message}: {why}")
    };
    status(403, "Forbidden", &message)
}

impl GadgetApi {
    fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }

    fn group_versions(&self) -> Value {
        Value::Array(
            self.versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v}))
                .collect(),
        )
    }

    fn preferred(&self) -> Value {
        let v = self.versions.last().cloned().unwrap_or_default();
        json!({"groupVersion": format!("{GROUP}/{v}"), "version": v})
    }

    fn gadget(&self, version: &str, name: &str, user: &str) -> Value {
        json!({
            "apiVersion": format!("{GROUP}/{version}"),
            "kind": KIND,
            "metadata": {"name": name, "uid": format!("gadget-{name}"), "resourceVersion": RESOURCE_VERSION,
                         "creationTimestamp": self.started},
            "status": {"servedBy": self.served_by, "bundleVersion": self.bundle_version, "requestedBy": user},
        })
    }

    /// The Table kubectl asks for (`as=Table`): name, the pod that served, the bundle.
    fn table(&self, version: &str, names: &[&str], user: &str) -> Value {
        let rows: Vec<Value> = names
            .iter()
            .map(|name| {
                let gadget = self.gadget(version, name, user);
                json!({
                    "cells": [name, self.served_by, self.bundle_version],
                    "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": gadget["metadata"]},
                })
            })
            .collect();
        json!({
            "kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": RESOURCE_VERSION},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "description": "The gadget's name.", "priority": 0},
                {"name": "Served By", "type": "string", "format": "", "description": "The pod that answered.", "priority": 0},
                {"name": "Bundle", "type": "string", "format": "", "description": "The bundle version of that pod.", "priority": 0},
            ],
            "rows": rows,
        })
    }

    /// The answer to an authorized `GET` of `route` by `user`; `table` when the client asked for
    /// a `meta.k8s.io/v1` Table.
    pub fn answer(&self, route: &Route, user: &str, table: bool) -> Answer {
        let unknown_version = |v: &str| {
            status(
                404,
                "NotFound",
                &format!(
                    "the server could not find the requested resource (version {v:?} of {GROUP} is not served)"
                ),
            )
        };
        match route {
            Route::Groups => (
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
                    "name": GROUP, "versions": self.group_versions(), "preferredVersion": self.preferred(),
                }]}),
            ),
            Route::Group => (
                200,
                json!({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
                       "versions": self.group_versions(), "preferredVersion": self.preferred()}),
            ),
            Route::Resources(v) if self.serves(v) => (
                200,
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{v}"),
                       "resources": [{"name": RESOURCE, "singularName": "gadget", "namespaced": false,
                                      "kind": KIND, "verbs": ["get", "list"]}]}),
            ),
            Route::List(v) if self.serves(v) => {
                if table {
                    return (200, self.table(v, &GADGETS, user));
                }
                let items: Vec<Value> = GADGETS.iter().map(|n| self.gadget(v, n, user)).collect();
                (
                    200,
                    json!({"apiVersion": format!("{GROUP}/{v}"), "kind": format!("{KIND}List"),
                           "metadata": {"resourceVersion": RESOURCE_VERSION}, "items": items}),
                )
            }
            Route::Get(v, name) if self.serves(v) => {
                if !GADGETS.contains(&name.as_str()) {
                    return status(404, "NotFound", &format!("{RESOURCE}.{GROUP} {name:?} not found"));
                }
                if table {
                    return (200, self.table(v, &[name], user));
                }
                (200, self.gadget(v, name, user))
            }
            Route::Resources(v) | Route::List(v) | Route::Get(v, _) => unknown_version(v),
        }
    }
}

/// Whether an `Accept` header asks for a `meta.k8s.io/v1` Table (kubectl get does).
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"v=v1") && params.contains(&"g=meta.k8s.io")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(versions: &[&str]) -> GadgetApi {
        GadgetApi {
            versions: versions.iter().map(|v| v.to_string()).collect(),
            served_by: "pod-1".into(),
            bundle_version: "0.2.0".into(),
            started: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn paths_route_to_discovery_and_the_resource() {
        assert_eq!(route("/apis"), Some(Route::Groups));
        assert_eq!(route("/apis/gadgets.test.olmv1.dev/"), Some(Route::Group));
        assert_eq!(
            route("/apis/gadgets.test.olmv1.dev/v1"),
            Some(Route::Resources("v1".into()))
        );
        assert_eq!(
            route("/apis/gadgets.test.olmv1.dev/v1/gadgets"),
            Some(Route::List("v1".into()))
        );
        assert_eq!(
            route("/apis/gadgets.test.olmv1.dev/v1/gadgets/first"),
            Some(Route::Get("v1".into(), "first".into()))
        );
        assert_eq!(route("/apis/other.example.com/v1"), None);
        assert_eq!(route("/api/v1/pods"), None);
        assert_eq!(
            route("/apis/gadgets.test.olmv1.dev/v1/gadgets/first/status"),
            None
        );
        assert_eq!(
            attributes(&Route::Resources("v1".into()), "/apis/gadgets.test.olmv1.dev/v1"),
            Attributes::NonResource {
                path: "/apis/gadgets.test.olmv1.dev/v1".into()
            }
        );
        assert_eq!(
            attributes(&Route::Get("v1".into(), "first".into()), ""),
            Attributes::Resource {
                verb: "get",
                version: "v1".into(),
                name: Some("first".into())
            }
        );
    }

    #[test]
    fn discovery_lists_the_served_versions_and_prefers_the_last() {
        let api = api(&["v1alpha1", "v1"]);
        let (code, groups) = api.answer(&Route::Groups, "u", false);
        assert_eq!(code, 200);
        assert_eq!(
            groups["groups"][0]["versions"][0]["groupVersion"],
            "gadgets.test.olmv1.dev/v1alpha1"
        );
        assert_eq!(groups["groups"][0]["preferredVersion"]["version"], "v1");
        let (code, resources) = api.answer(&Route::Resources("v1alpha1".into()), "u", false);
        assert_eq!(code, 200);
        assert_eq!(resources["resources"][0]["name"], "gadgets");
        assert_eq!(resources["resources"][0]["namespaced"], false);
        let (code, missing) = api.answer(&Route::Resources("v2".into()), "u", false);
        assert_eq!(code, 404);
        assert_eq!(missing["reason"], "NotFound");
    }

    #[test]
    fn gadgets_say_who_served_them_for_whom_as_objects_or_a_table() {
        let api = api(&["v1"]);
        let (code, list) = api.answer(&Route::List("v1".into()), "alice", false);
        assert_eq!(code, 200);
        assert_eq!(list["kind"], "GadgetList");
        assert_eq!(list["items"].as_array().unwrap().len(), 2);
        assert_eq!(list["items"][1]["metadata"]["name"], "second");
        assert_eq!(list["items"][0]["status"]["servedBy"], "pod-1");
        assert_eq!(list["items"][0]["status"]["bundleVersion"], "0.2.0");
        assert_eq!(list["items"][0]["status"]["requestedBy"], "alice");
        let (_, table) = api.answer(&Route::List("v1".into()), "alice", true);
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["rows"][0]["cells"], json!(["first", "pod-1", "0.2.0"]));
        let (code, one) = api.answer(&Route::Get("v1".into(), "first".into()), "alice", false);
        assert_eq!((code, one["kind"].as_str()), (200, Some("Gadget")));
        let (code, none) = api.answer(&Route::Get("v1".into(), "third".into()), "alice", false);
        assert_eq!(
            (code, none["message"].as_str()),
            (404, Some("gadgets.gadgets.test.olmv1.dev \"third\" not found"))
        );
        let (code, _) = api.answer(&Route::List("v1alpha1".into()), "alice", false);
        assert_eq!(code, 404, "a version this bundle does not serve");
    }

    #[test]
    fn kubectls_accept_header_asks_for_a_table() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
        assert!(!wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io"));
    }

    #[test]
    fn refusals_read_as_the_api_servers() {
        let (code, body) = forbidden(
            "bob",
            &Attributes::Resource {
                verb: "list",
                version: "v1".into(),
                name: None,
            },
            "",
        );
        assert_eq!(code, 403);
        assert_eq!(
            body["message"],
            "gadgets.gadgets.test.olmv1.dev is forbidden: User \"bob\" cannot list resource \"gadgets\" in API group \"gadgets.test.olmv1.dev\" at the cluster scope"
        );
    }
}
