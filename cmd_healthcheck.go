package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/healthcheck"
)

func newHealthcheckCommand() *cobra.Command {
	var path string
	var opts healthcheck.Options
	cmd := &cobra.Command{
		Use:   "healthcheck --config F [--liveness] [--timeout D]",
		Short: "Ask the local gateway's readiness (or liveness); print one line; exit 0 only for 200 within the timeout (3s), else 1",
		Long: "Ask the local gateway's readiness ({base}/health/readiness), or with --liveness its liveness ({base}/health),\n" +
			"over server.listen and server.tls as serve reads them, presenting server.tls.healthcheck_identity_file\n" +
			"when server.tls.client_ca_file requires client certificates. Print one line; exit 0 only for a 200\n" +
			"within --timeout, else 1. The operator runs it as the pod's probes when the listener requires client\n" +
			"certificates, with --timeout under the probe's timeoutSeconds.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err // a wrong flag, printed as an error naming it
			}
			cfg, err := config.Load(path)
			if err != nil {
				// One line, as the runtime's health log keeps it.
				fmt.Fprintln(cmd.OutOrStdout(), "unready: "+strings.Join(strings.Fields(err.Error()), " "))
				return exitError{1}
			}
			res := healthcheck.Check(context.Background(), cfg, opts)
			fmt.Fprintln(cmd.OutOrStdout(), res.Line)
			if !res.Ready {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "ferrofed.toml", "path of ferrofed.toml")
	cmd.Flags().BoolVar(&opts.Liveness, "liveness", false, "ask {base}/health (the process answers) instead of {base}/health/readiness")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", healthcheck.Timeout, "the whole budget: connect, TLS, request and answer; from 1ms to 1m")
	return cmd
}
