package main

import (
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// parseFlags reads the flags the Helm chart passes (and the few that select what runs); every
// other setting keeps the v1alpha1 default.
func parseFlags(cfg *config.ControllerConfiguration, args []string) error {
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "path to a kubeconfig; in-cluster config when empty")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "watch only this namespace (all when empty)")
	fs.StringVar(&cfg.ClusterResourceNamespace, "cluster-resource-namespace", cfg.ClusterResourceNamespace, "namespace of the Secrets of ClusterIssuers")
	fs.BoolVar(&cfg.LeaderElectionConfig.Enabled, "leader-elect", cfg.LeaderElectionConfig.Enabled, "run leader election")
	fs.StringVar(&cfg.LeaderElectionConfig.Namespace, "leader-election-namespace", cfg.LeaderElectionConfig.Namespace, "namespace of the leader election Lease")
	fs.DurationVar(&cfg.LeaderElectionConfig.LeaseDuration, "leader-election-lease-duration", cfg.LeaderElectionConfig.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&cfg.LeaderElectionConfig.RenewDeadline, "leader-election-renew-deadline", cfg.LeaderElectionConfig.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&cfg.LeaderElectionConfig.RetryPeriod, "leader-election-retry-period", cfg.LeaderElectionConfig.RetryPeriod, "leader election retry period")
	fs.StringSliceVar(&cfg.Controllers, "controllers", cfg.Controllers, "controllers to run: '*', 'name' or '-name'")
	fs.StringVar(&cfg.ACMEHTTP01Config.SolverImage, "acme-http01-solver-image", cfg.ACMEHTTP01Config.SolverImage, "image of the ACME HTTP-01 solver pods")
	fs.IntVar(&cfg.MaxConcurrentChallenges, "max-concurrent-challenges", cfg.MaxConcurrentChallenges, "ACME challenges processed at once")
	fs.BoolVar(&cfg.EnableCertificateOwnerRef, "enable-certificate-owner-ref", cfg.EnableCertificateOwnerRef, "make Certificates the owners of their Secrets")
	fs.StringVar(&cfg.MetricsListenAddress, "metrics-listen-address", cfg.MetricsListenAddress, "metrics address")
	fs.StringVar(&cfg.HealthzListenAddress, "healthz-listen-address", cfg.HealthzListenAddress, "healthz address")
	fs.Var(cliflag.NewMapStringBool(&cfg.FeatureGates), "feature-gates", "feature gates, key=value pairs")
	logf.AddFlags(&cfg.Logging, fs)
	return fs.Parse(args)
}
