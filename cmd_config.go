package main

import (
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/ferrofed/ferrofed/gateway/assemble"
	"github.com/ferrofed/ferrofed/gateway/config"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with ferrofed.toml"}
	var path string
	check := &cobra.Command{
		Use:   "check --config F",
		Short: "Load F exactly as serve does; exit 0 (warnings, such as a certificate near its expiry, on stderr), or list every problem and exit 1",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Everything serve does short of listening: the same function, its result
			// thrown away.
			g, err := assemble.Load(path, logr.Discard())
			if err != nil {
				var ps *config.Problems
				if errors.As(err, &ps) {
					fmt.Fprintln(cmd.ErrOrStderr(), ps.Error())
				} else {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", path, err)
				}
				return exitError{1}
			}
			cfg := g.Config
			// Warnings do not fail the check: a certificate that has expired or expires
			// within 7 days (server.tls.certificate_file, with its NotAfter).
			for _, w := range cfg.Warnings() {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", path, w)
			}
			r := cfg.Lifecycle()
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (drain %s = delay %s + shutdown %s + bindings %s)\n",
				path, r.Drain(), r.DrainDelay, r.ShutdownTimeout, r.BindingsDrainTimeout)
			return nil
		},
	}
	check.Flags().StringVar(&path, "config", "ferrofed.toml", "path of ferrofed.toml")
	cmd.AddCommand(check)
	return cmd
}
