//go:build tools

// Package tools pins the commands that hack/build-tools.sh builds from this module (kubelet,
// kube-proxy and cert-manager's only for a real node). Nothing imports it; `go mod tidy` keeps
// their modules in go.mod.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "helm.sh/helm/v4/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
