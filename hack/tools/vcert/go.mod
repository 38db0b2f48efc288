// Stands in for github.com/Venafi/vcert/v5, which the module proxy here does not serve at the
// version cert-manager v1.21.1 requires (v5.13.7; every v5.13.x answers 403) nor at any version
// with the API it uses (v5.12.x lacks pkg/venafi/ngts). cert-manager's controller links the
// Venafi issuer's code whatever issuers run (its controller-name defaults import it), so this
// module gives that code the types it names; NewClient always fails, so a Venafi Issuer reports
// NotReady with errNotBuilt's text and no other issuer is affected.
module github.com/Venafi/vcert/v5

go 1.24
