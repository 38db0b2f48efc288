// Package certificate: see vcert's go.mod. Only the names cert-manager's Venafi issuer uses.
package certificate

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"time"
)

// CustomFieldType is the kind of a custom field.
type CustomFieldType int

// The custom field kinds cert-manager sets.
const (
	CustomFieldPlain CustomFieldType = iota
	CustomFieldOrigin
)

// CustomField is a name/value sent with a request.
type CustomField struct {
	Type  CustomFieldType
	Name  string
	Value string
}

// ChainOption orders the chain of a retrieved certificate.
type ChainOption int

// ChainOptionRootLast puts the root last.
const ChainOptionRootLast ChainOption = 1

// CSrOriginOption says who made the CSR.
type CSrOriginOption int

// UserProvidedCSR: the CSR comes with the request.
const UserProvidedCSR CSrOriginOption = 2

// Request is a certificate request.
type Request struct {
	Subject          pkix.Name
	DNSNames         []string
	FriendlyName     string
	CustomFields     []CustomField
	CsrOrigin        CSrOriginOption
	ChainOption      ChainOption
	PickupID         string
	Timeout          time.Duration
	ValidityDuration *time.Duration
	IssuerHint       string
	csr              []byte
}

// NewRequest starts a request from a certificate template.
func NewRequest(cert *x509.Certificate) *Request {
	return &Request{Subject: cert.Subject, DNSNames: cert.DNSNames}
}

// SetCSR sets the request's CSR.
func (r *Request) SetCSR(csr []byte) error {
	r.csr = csr
	return nil
}

// PEMCollection is a retrieved certificate and its chain.
type PEMCollection struct {
	Certificate string
	PrivateKey  string
	Chain       []string
}
