// Command ferrofed is the federation gateway for clinical data and its Kubernetes
// operator, in one binary:
//
//	ferrofed serve --config F          run the gateway
//	ferrofed config check --config F   load F as serve does and list every problem
//	ferrofed healthcheck --config F    ask the local gateway's readiness (exit 0 or 1)
//	ferrofed audit drain --config F    deliver what the audit spools hold, then exit
//	ferrofed operator                  run the Gateway operator
//	ferrofed version                   print the version
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newRootCommand().Execute(); err != nil {
		if !errors.As(err, new(exitError)) {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
		os.Exit(exitCode(err))
	}
}

// exitError carries a process exit code through cobra without printing usage.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func exitCode(err error) int {
	if e := new(exitError); errors.As(err, e) {
		return e.code
	}
	return 1
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "ferrofed",
		Short:         "Federation gateway for clinical data (FHIR) and its Kubernetes operator",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Every command of the binary, each in its own cmd_*.go file.
	root.AddCommand(
		newServeCommand(),       // cmd_serve.go
		newConfigCommand(),      // cmd_config.go: config check
		newHealthcheckCommand(), // cmd_healthcheck.go
		newAuditCommand(),       // cmd_audit.go: audit drain
		newOperatorCommand(),    // cmd_operator.go
		newVersionCommand(),
	)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "ferrofed", version)
		},
	}
}
