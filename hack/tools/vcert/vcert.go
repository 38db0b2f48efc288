// Package vcert: see go.mod. Only the names cert-manager's Venafi issuer uses.
package vcert

import (
	"errors"
	"net/http"

	"github.com/Venafi/vcert/v5/pkg/endpoint"
)

// Config is the connection a Venafi Issuer describes.
type Config struct {
	ConnectorType   endpoint.ConnectorType
	BaseUrl         string //nolint:revive // vcert's field name
	Zone            string
	Credentials     *endpoint.Authentication
	ConnectionTrust string
	LogVerbose      bool
	Client          *http.Client
}

var errNotBuilt = errors.New("the Venafi issuer is not part of this cert-manager build (olmv1's hack/cert-manager.sh: its vcert module is not available from the Go module proxy)")

// NewClient always fails: see errNotBuilt.
func NewClient(*Config, ...bool) (endpoint.Connector, error) { return nil, errNotBuilt }
