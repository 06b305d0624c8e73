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
	cmd := &cobra.Command{
		Use:   "healthcheck --config F",
		Short: "Ask the local gateway's readiness; print one line; exit 0 only for 200 within 3s, else 1",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				// One line, as the runtime's health log keeps it.
				fmt.Fprintln(cmd.OutOrStdout(), "unready: "+strings.Join(strings.Fields(err.Error()), " "))
				return exitError{1}
			}
			res := healthcheck.Run(context.Background(), cfg)
			fmt.Fprintln(cmd.OutOrStdout(), res.Line)
			if !res.Ready {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "ferrofed.toml", "path of ferrofed.toml")
	return cmd
}
