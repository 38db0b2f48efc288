// Package cloud: see vcert's go.mod. Only the names cert-manager's Venafi issuer uses.
package cloud

import (
	"github.com/Venafi/vcert/v5/pkg/certificate"
	"github.com/Venafi/vcert/v5/pkg/endpoint"
)

// Connector is never constructed in this build (vcert.NewClient always fails).
type Connector struct{}

// GetType says which service this connector talks to.
func (*Connector) GetType() endpoint.ConnectorType { return endpoint.ConnectorTypeUndefined }

// Ping checks that the service answers.
func (*Connector) Ping() error { return errNeverBuilt }

// ReadZoneConfiguration reads a zone's policy.
func (*Connector) ReadZoneConfiguration() (*endpoint.ZoneConfiguration, error) {
	return nil, errNeverBuilt
}

// RequestCertificate sends a request.
func (*Connector) RequestCertificate(*certificate.Request) (string, error) { return "", errNeverBuilt }

// RetrieveCertificate picks up an issued certificate.
func (*Connector) RetrieveCertificate(*certificate.Request) (*certificate.PEMCollection, error) {
	return nil, errNeverBuilt
}

// Authenticate logs in.
func (*Connector) Authenticate(*endpoint.Authentication) error { return errNeverBuilt }

var errNeverBuilt = errorString("vcert connectors are not part of this build")

type errorString string

func (e errorString) Error() string { return string(e) }
