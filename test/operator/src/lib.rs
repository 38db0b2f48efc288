//! webhook-operator: the operator olmv1 installs on a real node in its tests, written the way OLM
//! users write theirs. It serves a conversion webhook and a validating webhook over HTTPS with the
//! certificate OLM mounts, and a controller that writes each Widget's status with the RBAC its
//! bundle asks for, and it reports `Upgradeable` on the OperatorCondition OLM names for it
//! (`upgradeable`). The webhook logic is pure (`conversion`, `admission`, `controller::status_for`)
//! so unit tests drive it without a cluster. With `--mode aggregated-api` it is instead the server
//! of an APIService (`aggregated`: the API, pure; `delegated`: authentication and authorization
//! delegated to the API server; `apiserver`: the request path).

pub mod admission;
pub mod aggregated;
pub mod apiserver;
pub mod controller;
pub mod conversion;
pub mod delegated;
pub mod serve;
pub mod tls;
pub mod upgradeable;
pub mod widget;
