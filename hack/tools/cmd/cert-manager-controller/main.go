// The cert-manager controller, built from cert-manager's root Go module. Upstream's own main
// (cmd/controller) is a separate Go module that the module proxy does not serve, so this is our
// entry point over the same packages: the v1alpha1 defaults and validation of
// ControllerConfiguration, the controllers and issuers registered in pkg/controller and
// pkg/issuer, the metrics and healthz servers and Lease leader election. Flags: the ones the
// Helm chart passes (flags.go); metrics are served over plain HTTP as the chart's default does.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	defaults "github.com/cert-manager/cert-manager/internal/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/internal/apis/config/controller/validation"
	"github.com/cert-manager/cert-manager/internal/cmd/util"
	"github.com/cert-manager/cert-manager/internal/controller/feature"
	"github.com/cert-manager/cert-manager/internal/pem"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/server"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"

	// The controllers and issuers, registered by their packages' init (upstream's list). The
	// Venafi issuer links the vcert stand-in (vcert/go.mod): its Issuers report why they are
	// not Ready.
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmechallenges"
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmeorders"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/gateways"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/ingresses"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/venafi"
)

// How long the metrics server gets to finish its requests on shutdown.
const shutdownGrace = 5 * time.Second

func main() {
	ctx, exit := util.SetupExitHandler(context.Background(), util.GracefulShutdown)
	defer exit() // may call os.Exit: deferred first so that it runs last

	logf.InitLogs()
	defer logf.FlushLogs()
	ctx = logf.NewContext(ctx, logf.Log, "controller")

	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, pflag.ErrHelp) {
		logf.Log.Error(err, "error executing command")
		util.SetExitCode(err)
	}
}

func defaultConfiguration() (*config.ControllerConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.ControllerConfiguration{}
	scheme.Default(versioned)
	cfg := &config.ControllerConfiguration{}
	if err := scheme.Convert(versioned, cfg, nil); err != nil {
		return nil, err
	}
	return cfg, nil
}

// enabledControllers expands --controllers ("*", "name", "-name") the way upstream does.
func enabledControllers(cfg *config.ControllerConfiguration) sets.Set[string] {
	enabled := sets.New[string]()
	var disabled []string
	for _, c := range cfg.Controllers {
		switch {
		case c == "*":
			enabled.Insert(defaults.DefaultEnabledControllers...)
		case strings.HasPrefix(c, "-"):
			disabled = append(disabled, strings.TrimPrefix(c, "-"))
		default:
			enabled.Insert(c)
		}
	}
	if len(disabled) > 0 && enabled.Len() == 0 {
		enabled.Insert(defaults.DefaultEnabledControllers...)
	}
	if utilfeature.DefaultFeatureGate.Enabled(feature.ExperimentalCertificateSigningRequestControllers) {
		enabled.Insert(defaults.ExperimentalCertificateSigningRequestControllers...)
	}
	if cfg.Namespace != "" {
		enabled.Delete(defaults.ClusterScopedControllers...)
	}
	return enabled.Delete(disabled...)
}

func contextFactory(ctx context.Context, cfg *config.ControllerConfiguration) (*controller.ContextFactory, error) {
	quantities := map[string]*resource.Quantity{}
	for name, s := range map[string]string{
		"request CPU": cfg.ACMEHTTP01Config.SolverResourceRequestCPU, "request memory": cfg.ACMEHTTP01Config.SolverResourceRequestMemory,
		"limit CPU": cfg.ACMEHTTP01Config.SolverResourceLimitsCPU, "limit memory": cfg.ACMEHTTP01Config.SolverResourceLimitsMemory,
	} {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("ACME HTTP-01 solver %s %q: %w", name, s, err)
		}
		quantities[name] = &q
	}
	nameservers := cfg.ACMEDNS01Config.RecursiveNameservers
	if len(nameservers) == 0 {
		nameservers = dnsutil.RecursiveNameservers
	}
	return controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         cfg.KubeConfig,
		KubernetesAPIQPS:   cfg.KubernetesAPIQPS,
		KubernetesAPIBurst: cfg.KubernetesAPIBurst,
		APIServerHost:      cfg.APIServerHost,
		Namespace:          cfg.Namespace,
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverResourceRequestCPU:    *quantities["request CPU"],
			HTTP01SolverResourceRequestMemory: *quantities["request memory"],
			HTTP01SolverResourceLimitsCPU:     *quantities["limit CPU"],
			HTTP01SolverResourceLimitsMemory:  *quantities["limit memory"],
			ACMEHTTP01SolverRunAsNonRoot:      cfg.ACMEHTTP01Config.SolverRunAsNonRoot,
			HTTP01SolverImage:                 cfg.ACMEHTTP01Config.SolverImage,
			HTTP01SolverNameservers:           cfg.ACMEHTTP01Config.SolverNameservers,
			HTTP01SolverExtraLabels:           cfg.ACMEHTTP01Config.SolverExtraLabels,
			HTTP01SolverRuntimeClassName:      cfg.ACMEHTTP01Config.SolverRuntimeClassName,
			DNS01Nameservers:                  nameservers,
			DNS01CheckRetryPeriod:             cfg.ACMEDNS01Config.CheckRetryPeriod,
			DNS01CheckAuthoritative:           !cfg.ACMEDNS01Config.RecursiveNameserversOnly,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: cfg.MaxConcurrentChallenges},
		IssuerOptions: controller.IssuerOptions{
			ClusterIssuerAmbientCredentials: cfg.ClusterIssuerAmbientCredentials,
			IssuerAmbientCredentials:        cfg.IssuerAmbientCredentials,
			ClusterResourceNamespace:        cfg.ClusterResourceNamespace,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerName:                 cfg.IngressShimConfig.DefaultIssuerName,
			DefaultIssuerKind:                 cfg.IngressShimConfig.DefaultIssuerKind,
			DefaultIssuerGroup:                cfg.IngressShimConfig.DefaultIssuerGroup,
			DefaultAutoCertificateAnnotations: cfg.IngressShimConfig.DefaultAutoCertificateAnnotations,
			ExtraCertificateAnnotations:       cfg.IngressShimConfig.ExtraCertificateAnnotations,
			GatewayAPIExtraProtocols:          sets.New(cfg.GatewayAPIConfig.ExtraProtocols...),
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           cfg.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes:                 cfg.CopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: cfg.CertificateRequestMinimumBackoffDuration,
			CertificateRequestMaximumBackoffDuration: cfg.CertificateRequestMaximumBackoffDuration,
		},
		ConfigOptions: controller.ConfigOptions{
			EnableGatewayAPI:            cfg.GatewayAPIConfig.Enabled,
			EnableGatewayAPIListenerSet: cfg.GatewayAPIConfig.EnableListenerSet,
		},
	})
}

func run(rootCtx context.Context, args []string) error {
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
	if errs := validation.ValidateControllerConfiguration(cfg, nil); len(errs) > 0 {
		return fmt.Errorf("error validating flags: %w", errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	if cfg.GatewayAPIConfig.Enabled {
		return errors.New("this build does not run the Gateway API certificate-shim")
	}
	l := cfg.PEMSizeLimitsConfig
	pem.SetGlobalSizeLimits(pem.NewSizeLimitsFromConfig(l.MaxCertificateSize, l.MaxPrivateKeySize, l.MaxChainLength, l.MaxBundleSize))

	rootCtx, cancel := context.WithCancel(rootCtx)
	defer cancel()
	log := logf.FromContext(rootCtx)
	g, rootCtx := errgroup.WithContext(rootCtx)

	factory, err := contextFactory(rootCtx, cfg)
	if err != nil {
		return err
	}
	cctx, err := factory.Build()
	if err != nil {
		return err
	}
	enabled := enabledControllers(cfg)
	log.Info("starting cert-manager controller", "controllers", sets.List(enabled))

	metricsLn, err := server.Listen(rootCtx, "tcp", cfg.MetricsListenAddress)
	if err != nil {
		return fmt.Errorf("failed to listen on metrics address %s: %w", cfg.MetricsListenAddress, err)
	}
	informers := cctx.SharedInformerFactory.Certmanager().V1()
	cctx.Metrics.SetupACMECollector(cctx.SharedInformerFactory.Acme().V1().Challenges().Lister())
	cctx.Metrics.SetupCertificateCollector(informers.Certificates().Lister())
	cctx.Metrics.SetupIssuerCollector(informers.Issuers().Lister())
	if enabled.Has("clusterissuers") {
		cctx.Metrics.SetupClusterIssuerCollector(informers.ClusterIssuers().Lister())
	}
	metricsServer := cctx.Metrics.NewServer(metricsLn)
	g.Go(func() error {
		<-rootCtx.Done()
		shutdownCtx, done := context.WithTimeout(context.Background(), shutdownGrace)
		defer done()
		return metricsServer.Shutdown(shutdownCtx) //nolint:contextcheck // the root context is done
	})
	g.Go(func() error {
		if err := metricsServer.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})

	healthzLn, err := (&net.ListenConfig{}).Listen(rootCtx, "tcp", cfg.HealthzListenAddress)
	if err != nil {
		return fmt.Errorf("failed to listen on healthz address %s: %w", cfg.HealthzListenAddress, err)
	}
	healthzServer := healthz.NewServer(cfg.LeaderElectionConfig.HealthzTimeout)
	g.Go(func() error { return healthzServer.Start(rootCtx, healthzLn) })

	elected := make(chan struct{})
	if cfg.LeaderElectionConfig.Enabled {
		g.Go(func() error { return leaderElection(rootCtx, cfg, factory, healthzServer, elected) })
	} else {
		close(elected)
	}
	select {
	case <-rootCtx.Done():
		return g.Wait()
	case <-elected:
	}

	for name, start := range controller.Known() {
		if !enabled.Has(name) {
			continue
		}
		iface, err := start(factory)
		if err != nil {
			cancel()
			return errors.Join(fmt.Errorf("error starting controller %s: %w", name, err), g.Wait())
		}
		g.Go(func() error { return iface.Run(cfg.NumberOfConcurrentWorkers, rootCtx) })
	}
	cctx.SharedInformerFactory.Start(rootCtx.Done())
	cctx.KubeSharedInformerFactory.Start(rootCtx.Done())
	cctx.HTTP01ResourceMetadataInformersFactory.Start(rootCtx.Done())

	err = g.Wait()
	cctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	cctx.KubeSharedInformerFactory.Shutdown()
	cctx.SharedInformerFactory.Shutdown()
	if err != nil {
		return fmt.Errorf("error running controller: %w", err)
	}
	return nil
}

// leaderElection closes elected once this replica holds the Lease, and fails when it loses it.
func leaderElection(ctx context.Context, cfg *config.ControllerConfiguration, factory *controller.ContextFactory, hz *healthz.Server, elected chan struct{}) error {
	lctx, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	id, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("error getting hostname: %w", err)
	}
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock,
		cfg.LeaderElectionConfig.Namespace, "cert-manager-controller",
		lctx.Client.CoreV1(), lctx.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id + "-external-cert-manager-controller", EventRecorder: lctx.Recorder},
		map[string]string{"app.kubernetes.io/managed-by": "cert-manager"})
	if err != nil {
		return fmt.Errorf("error creating leader election lock: %w", err)
	}
	lost := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaderElectionConfig.LeaseDuration,
		RenewDeadline:   cfg.LeaderElectionConfig.RenewDeadline,
		RetryPeriod:     cfg.LeaderElectionConfig.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        hz.LeaderHealthzAdaptor,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost <- errors.New("leader election lost")
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	select {
	case err := <-lost:
		return err
	default:
		return nil
	}
}
