// Package util: see vcert's go.mod. Only the names cert-manager's Venafi issuer uses.
package util

// IssuerHintAllIssuers lets the service pick any issuer.
const IssuerHintAllIssuers = "ALL_ISSUERS"
