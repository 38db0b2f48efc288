// The cert-manager cainjector, built from cert-manager's root Go module. Upstream's own main
// (cmd/cainjector) is a separate Go module that the module proxy does not serve, so this is our
// entry point over the same packages: the v1alpha1 defaults and validation of
// CAInjectorConfiguration and the injectors of pkg/controller/cainjector, run by a
// controller-runtime manager. Flags: the ones the Helm chart passes (--v, --leader-election-*,
// --namespace, --feature-gates, --metrics-listen-address); metrics are served over plain HTTP.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/cainjector/scheme"
	"github.com/cert-manager/cert-manager/internal/apis/config/cainjector/validation"
	"github.com/cert-manager/cert-manager/internal/cmd/util"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	cmutil "github.com/cert-manager/cert-manager/pkg/util"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
)

// How long to wait for the Certificate CRD before giving up: cainjector watches Certificates, so
// it cannot start without it; five minutes is what upstream's cainjector waits.
const certificateCRDWait = 5 * time.Minute

func main() {
	ctx, exit := util.SetupExitHandler(context.Background(), util.GracefulShutdown)
	defer exit() // may call os.Exit: deferred first so that it runs last

	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	ctx = logf.NewContext(ctx, logf.Log, "cainjector")

	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, pflag.ErrHelp) {
		logf.Log.Error(err, "error executing command")
		util.SetExitCode(err)
	}
}

func defaultConfiguration() (*config.CAInjectorConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.CAInjectorConfiguration{}
	scheme.Default(versioned)
	cfg := &config.CAInjectorConfiguration{}
	if err := scheme.Convert(versioned, cfg, nil); err != nil {
		return nil, err
	}
	return cfg, nil
}

func parseFlags(cfg *config.CAInjectorConfiguration, args []string) error {
	fs := pflag.NewFlagSet("cainjector", pflag.ContinueOnError)
	fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "path to a kubeconfig; in-cluster config when empty")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "watch only this namespace (all when empty)")
	fs.BoolVar(&cfg.LeaderElectionConfig.Enabled, "leader-elect", cfg.LeaderElectionConfig.Enabled, "run leader election")
	fs.StringVar(&cfg.LeaderElectionConfig.Namespace, "leader-election-namespace", cfg.LeaderElectionConfig.Namespace, "namespace of the leader election Lease")
	fs.DurationVar(&cfg.LeaderElectionConfig.LeaseDuration, "leader-election-lease-duration", cfg.LeaderElectionConfig.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&cfg.LeaderElectionConfig.RenewDeadline, "leader-election-renew-deadline", cfg.LeaderElectionConfig.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&cfg.LeaderElectionConfig.RetryPeriod, "leader-election-retry-period", cfg.LeaderElectionConfig.RetryPeriod, "leader election retry period")
	fs.StringVar(&cfg.MetricsListenAddress, "metrics-listen-address", cfg.MetricsListenAddress, "metrics address; '0' disables it")
	fs.Var(cliflag.NewMapStringBool(&cfg.FeatureGates), "feature-gates", "feature gates, key=value pairs")
	logf.AddFlags(&cfg.Logging, fs)
	return fs.Parse(args)
}

func run(ctx context.Context, args []string) error {
	log := logf.FromContext(ctx)
	cfg, err := defaultConfiguration()
	if err != nil {
		return fmt.Errorf("default configuration: %w", err)
	}
	if err := parseFlags(cfg, args); err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	if errs := validation.ValidateCAInjectorConfiguration(cfg, nil); len(errs) > 0 {
		return fmt.Errorf("error validating flags: %w", errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}

	if cfg.KubeConfig != "" {
		if err := os.Setenv("KUBECONFIG", cfg.KubeConfig); err != nil {
			return err
		}
	}
	restConfig := cmutil.RestConfigWithUserAgent(ctrl.GetConfigOrDie(), "cainjector")

	var namespaces map[string]cache.Config
	if cfg.Namespace != "" {
		namespaces = map[string]cache.Config{cfg.Namespace: {}}
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// Secrets are read directly, never cached: a cluster's Secrets can be many and large.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                cfg.LeaderElectionConfig.Enabled,
		LeaderElectionNamespace:       cfg.LeaderElectionConfig.Namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionLabels:          map[string]string{"app.kubernetes.io/managed-by": "cert-manager-cainjector"},
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &cfg.LeaderElectionConfig.LeaseDuration,
		RenewDeadline:                 &cfg.LeaderElectionConfig.RenewDeadline,
		RetryPeriod:                   &cfg.LeaderElectionConfig.RetryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsListenAddress},
	})
	if err != nil {
		return fmt.Errorf("error creating manager: %w", err)
	}

	if cfg.EnableDataSourceConfig.Certificates {
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("failed to create client: %w", err)
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, certificateCRDWait, true, func(ctx context.Context) (bool, error) {
			var crd apiext.CustomResourceDefinition
			err := direct.Get(ctx, types.NamespacedName{Name: "certificates.cert-manager.io"}, &crd)
			if apierrors.IsNotFound(err) {
				log.Info("certificates.cert-manager.io CRD not found yet, retrying")
				return false, nil
			}
			return err == nil, err
		})
		if err != nil {
			return fmt.Errorf("waiting for the certificates.cert-manager.io CRD: %w", err)
		}
	}

	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    cfg.Namespace,
		IgnoreNamespaces:             cfg.IgnoreNamespaces,
		EnableCertificatesDataSource: cfg.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   cfg.EnableInjectableConfig.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: cfg.EnableInjectableConfig.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     cfg.EnableInjectableConfig.APIServices,
			cainjector.CustomResourceDefinitionName:       cfg.EnableInjectableConfig.CustomResourceDefinitions,
		},
	})
	if err != nil {
		return fmt.Errorf("failed to register injectors: %w", err)
	}
	log.Info("starting cert-manager cainjector")
	return mgr.Start(ctx)
}
