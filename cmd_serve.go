package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ferrofed/ferrofed/gateway/assemble"
)

func newServeCommand() *cobra.Command {
	var path string
	var verbosity int
	cmd := &cobra.Command{
		Use:   "serve --config F",
		Short: "Run the gateway: load F (refusing every problem), listen, drain on SIGTERM/SIGINT, reload on SIGHUP",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, flush := newLogger(verbosity)
			defer flush()
			g, err := assemble.Load(path, log)
			var built assemble.BuildError
			switch {
			case errors.As(err, &built):
				log.Error(err, "Refused to start")
				return exitError{1}
			case err != nil:
				// The same report as `config check`, before anything listens.
				fmt.Fprintln(cmd.ErrOrStderr(), err)
				return exitError{1}
			}
			return serve(cmd, path, g, log)
		},
	}
	cmd.Flags().StringVar(&path, "config", "ferrofed.toml", "path of ferrofed.toml")
	cmd.Flags().IntVarP(&verbosity, "v", "v", 0, "log verbosity: 1 adds access logs and routine readiness results")
	return cmd
}

// serve runs the assembled gateway process until the drain ends.
func serve(cmd *cobra.Command, path string, g *assemble.Gateway, log logr.Logger) error {
	srv := g.Server
	// Signals are taken before the listener opens and before the address is announced, so
	// that a SIGTERM arriving at any point after that drains instead of killing the
	// process. The first SIGTERM/SIGINT drains; a second one exits at once, for an operator
	// who decided not to wait. SIGHUP reloads.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := srv.Listen(); err != nil {
		log.Error(err, "Refused to start: cannot listen")
		return exitError{1}
	}
	if err := g.Start(); err != nil {
		log.Error(err, "Refused to start: a binding could not start")
		return exitError{1}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "ferrofed: listening on %s\n", srv.URL())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		draining := false
		for sig := range sigs {
			switch {
			case sig == syscall.SIGHUP:
				log.Info("Reloading configuration", "signal", sig.String(), "path", path)
				_ = srv.ReloadFile(path) // a refusal is logged; the old configuration keeps serving
			case !draining:
				draining = true
				log.Info("Draining", "signal", sig.String())
				cancel()
			default:
				log.Info("Second stop signal: exiting without finishing the drain", "signal", sig.String())
				os.Exit(1)
			}
		}
	}()

	if err := srv.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error(err, "Gateway stopped")
		return exitError{1}
	}
	log.Info("Stopped")
	return nil
}

// newLogger logs JSON to stderr; verbosity v enables logr's V(1..v).
func newLogger(v int) (logr.Logger, func()) {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zapcore.Level(-v))
	zc.Sampling = nil // a drain's log lines must all be there
	zc.OutputPaths = []string{"stderr"}
	zc.EncoderConfig.TimeKey = "time"
	zc.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	z, err := zc.Build()
	if err != nil {
		return logr.Discard(), func() {}
	}
	return zapr.NewLogger(z), func() { _ = z.Sync() }
}
