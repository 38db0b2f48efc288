// Package verror: see vcert's go.mod. Only the names cert-manager's Venafi issuer uses.
package verror

import "errors"

// ServerUnavailableError: the Venafi service did not answer.
var ServerUnavailableError = errors.New("server unavailable") //nolint:revive,staticcheck // vcert's name
