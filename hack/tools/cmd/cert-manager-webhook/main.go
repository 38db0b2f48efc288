// The cert-manager webhook, built from cert-manager's root Go module. Upstream's own main
// (cmd/webhook) is a separate Go module that the module proxy does not serve, so this is our
// entry point over the same packages: the same flags (pkg/webhook/options), defaults, validation
// and server (internal/webhook). Only a --config file is not read: the Deployment passes flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cert-manager/cert-manager/internal/apis/config/webhook/validation"
	"github.com/cert-manager/cert-manager/internal/cmd/util"
	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
)

func main() {
	ctx, exit := util.SetupExitHandler(context.Background(), util.GracefulShutdown)
	defer exit() // may call os.Exit: deferred first so that it runs last

	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	ctx = logf.NewContext(ctx, logf.Log, "webhook")

	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, pflag.ErrHelp) {
		logf.Log.Error(err, "error executing command")
		util.SetExitCode(err)
	}
}

func run(ctx context.Context, args []string) error {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		return fmt.Errorf("default configuration: %w", err)
	}
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	options.AddConfigFlags(fs, cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	if errs := validation.ValidateWebhookConfiguration(cfg, nil); len(errs) > 0 {
		return fmt.Errorf("error validating flags: %w", errs.ToAggregate())
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	log := logf.FromContext(ctx)
	log.Info("starting cert-manager webhook")
	srv, err := cmwebhook.NewCertManagerWebhookServer(log, *cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
