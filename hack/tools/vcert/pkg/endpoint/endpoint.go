// Package endpoint: see vcert's go.mod. Only the names cert-manager's Venafi issuer uses.
package endpoint

import "github.com/Venafi/vcert/v5/pkg/certificate"

// ConnectorType names a Venafi service.
type ConnectorType int

// The Venafi services an Issuer can name.
const (
	ConnectorTypeUndefined ConnectorType = iota
	ConnectorTypeFake
	ConnectorTypeCloud
	ConnectorTypeTPP
	ConnectorTypeFirefly
	ConnectorTypeNGTS
)

// Authentication is an Issuer's credentials.
type Authentication struct {
	User         string
	Password     string
	APIKey       string
	AccessToken  string
	ClientId     string //nolint:revive // vcert's field name
	ClientSecret string
	Scope        string
	TokenURL     string
}

// ZoneConfiguration is a zone's policy; this build never reads one.
type ZoneConfiguration struct{}

// UpdateCertificateRequest applies the zone's defaults; there are none here.
func (*ZoneConfiguration) UpdateCertificateRequest(*certificate.Request) {}

// ValidateCertificateRequest checks a request against the zone; nothing to check here.
func (*ZoneConfiguration) ValidateCertificateRequest(*certificate.Request) error { return nil }

// Connector is a client of a Venafi service.
type Connector interface {
	GetType() ConnectorType
	Ping() error
	ReadZoneConfiguration() (*ZoneConfiguration, error)
	RequestCertificate(*certificate.Request) (string, error)
	RetrieveCertificate(*certificate.Request) (*certificate.PEMCollection, error)
}

// ErrCertificatePending: the certificate is not issued yet.
type ErrCertificatePending struct{ CertificateID, Status string }

func (e ErrCertificatePending) Error() string {
	return "certificate " + e.CertificateID + " is pending"
}

// ErrRetrieveCertificateTimeout: the certificate was not issued in time.
type ErrRetrieveCertificateTimeout struct{ CertificateID string }

func (e ErrRetrieveCertificateTimeout) Error() string {
	return "timed out retrieving certificate " + e.CertificateID
}
