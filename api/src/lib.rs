//! API types of OLM v1 (`olm.operatorframework.io/v1`): `ClusterExtension` and `ClusterCatalog`,
//! their condition types and reasons, and the generated CRDs; and OLM classic's OperatorCondition
//! (`operators.coreos.com/v2`), which olmv1 keeps for installed bundles. No I/O lives here.
#![forbid(unsafe_code)]

pub mod crd;
pub mod operator_condition;
pub mod v1;

pub use k8s_openapi;
pub use kube;
