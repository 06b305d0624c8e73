package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

func newAuditCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Work with the audit trail's spools"}
	cmd.AddCommand(newAuditDrainCommand())
	return cmd
}

func newAuditDrainCommand() *cobra.Command {
	var path, messagePath string
	var verbosity int
	opts := audit.HandOverOptions{}
	cmd := &cobra.Command{
		Use:   "drain --config F [--timeout D] [--termination-message-path P]",
		Short: "Deliver what the configuration's audit spools hold, as the gateway would; exit 0 once they are empty",
		Long: "Open the spools F names (audit.spool_dir, audit.feed.spool_dir; destination \"repository\"), taking their\n" +
			"locks, and deliver every record exactly as the gateway does, until every spool is empty or --timeout\n" +
			"passes. Nothing undelivered is deleted. One line per spool on stdout, then the outcome; the hand-over\n" +
			"message to --termination-message-path. Exit 0 empty, 1 a wrong flag or configuration (no spool),\n" +
			"3 timeout (records left), 4 failed (a spool held by another process, missing or unreadable, a cursor not\n" +
			"written, the message not written), 5 only quarantined entries left (docs/audit-spool.md, \"Hand-over\").",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, flush := newLogger(verbosity)
			defer flush()
			opts.Trail.Logger = log.WithName("audit")
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			res := handOver(ctx, cmd.ErrOrStderr(), path, opts)
			printHandOver(cmd.OutOrStdout(), res)
			if messagePath != "" {
				if err := writeHandOverMessage(messagePath, res.Message); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "--termination-message-path %s: %v\n", messagePath, err)
					if res.Exit == audit.ExitEmpty {
						res.Exit = audit.ExitFailed // no one can read that it is empty
					}
				}
			}
			if res.Exit != 0 {
				return exitError{res.Exit}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "ferrofed.toml", "path of ferrofed.toml")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", audit.DefaultHandOverTimeout,
		fmt.Sprintf("give up after this long, deleting nothing undelivered; from %s to %s", audit.MinHandOverTimeout, audit.MaxHandOverTimeout))
	cmd.Flags().StringVar(&messagePath, "termination-message-path", "",
		"write the hand-over message (one line of JSON) to this file at the end, e.g. /dev/termination-log")
	cmd.Flags().IntVarP(&verbosity, "v", "v", 0, "log verbosity")
	return cmd
}

// handOver loads the configuration and runs the hand-over; what stops it before any
// spool is opened (a wrong flag or configuration) is printed to stderr and is
// ExitUsage, with outcome failed.
func handOver(ctx context.Context, stderr io.Writer, path string, opts audit.HandOverOptions) audit.HandOverResult {
	usage := func(err error) audit.HandOverResult {
		var ps *config.Problems
		if errors.As(err, &ps) {
			fmt.Fprintln(stderr, ps.Error())
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
		}
		return audit.HandOverResult{Message: lifecycle.HandOverMessage{Outcome: lifecycle.HandOverFailed, Left: []lifecycle.SpoolLeft{}},
			Err: err, Exit: audit.ExitUsage}
	}
	if err := audit.ValidateHandOverTimeout(opts.Timeout); err != nil {
		return usage(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return usage(err)
	}
	res, err := audit.HandOver(ctx, cfg, opts)
	if err != nil {
		return usage(err)
	}
	if res.Err != nil {
		fmt.Fprintf(stderr, "ferrofed audit drain: %s: %v\n", res.Message.Outcome, res.Err)
	}
	return res
}

// printHandOver prints one line per spool and the outcome (docs/audit-spool.md,
// "Hand-over").
func printHandOver(w io.Writer, res audit.HandOverResult) {
	for _, s := range res.Spools {
		fmt.Fprintf(w, "%s: delivered=%d left_records=%d left_bytes=%d undelivered=%d quarantined=%d dir=%s\n",
			s.Key, s.Delivered, s.Left.Records, s.Left.Bytes, s.Pending, s.Quarantined, s.Dir)
	}
	records, size := lifecycle.Undelivered(res.Message.Left)
	fmt.Fprintf(w, "outcome=%s delivered=%d left_records=%d left_bytes=%d exit=%d\n",
		res.Message.Outcome, res.Message.Delivered, records, size, res.Exit)
}

// writeHandOverMessage writes m, one line, creating or truncating path.
func writeHandOverMessage(path string, m lifecycle.HandOverMessage) error {
	line, err := m.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(line, '\n'), 0o644)
}
