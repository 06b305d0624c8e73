package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/deliver"
	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// The bounds of HandOverOptions.Timeout (`ferrofed audit drain --timeout`).
const (
	DefaultHandOverTimeout = 10 * time.Minute
	MinHandOverTimeout     = time.Second
	MaxHandOverTimeout     = 24 * time.Hour
)

// handOverPoll is how often the hand-over looks whether its spools are empty.
const handOverPoll = 50 * time.Millisecond

// ErrNoSpool: the configuration names no spool to hand over (no [audit], or a
// destination other than "repository").
var ErrNoSpool = errors.New("no audit spool")

// HandOverOptions shape one hand-over.
type HandOverOptions struct {
	// Timeout bounds the whole hand-over; default DefaultHandOverTimeout, from
	// MinHandOverTimeout to MaxHandOverTimeout.
	Timeout time.Duration
	// Trail tunes the trail the hand-over builds (its logger, file system, backoff);
	// its Tracker and Authorize are the hand-over's own.
	Trail Options
}

// HandOverSpool is what the hand-over did with one spool.
type HandOverSpool struct {
	// Key is the destination's report key (audit_repository, audit_feed), Dir its spool.
	Key, Dir string
	// Delivered counts the records this run delivered from it.
	Delivered int64
	// Left is what it still holds: undelivered records and quarantined entries.
	Left lifecycle.SpoolLeft
	// Pending and Quarantined split Left.Records.
	Pending, Quarantined int
}

// HandOverResult is what a hand-over did: its message (lifecycle.HandOverMessage,
// written to the termination message file), each spool's line, and, when the
// outcome is failed, why.
type HandOverResult struct {
	Message lifecycle.HandOverMessage
	Spools  []HandOverSpool
	Err     error
	// Exit is the command's exit status for this result.
	Exit int
}

// The exit statuses of `ferrofed audit drain` (docs/audit-spool.md, "Hand-over").
const (
	// ExitEmpty: every spool is empty, nothing undelivered and nothing in quarantine.
	ExitEmpty = 0
	// ExitUsage: a wrong flag or configuration, or one that names no spool; nothing
	// was opened.
	ExitUsage = 1
	// ExitTimeout: --timeout passed with records undelivered; none deleted.
	ExitTimeout = 3
	// ExitFailed: a spool could not be opened (another process holds it, a directory
	// that cannot be made or read: nothing was delivered from any spool), or its
	// cursor could not be written at close.
	ExitFailed = 4
	// ExitQuarantine: everything deliverable was delivered, but a quarantine holds
	// entries no delivery empties (lifecycle.HandOverExitQuarantine, which the
	// operator reads).
	ExitQuarantine = lifecycle.HandOverExitQuarantine
)

// ValidateHandOverTimeout says what is wrong with a --timeout.
func ValidateHandOverTimeout(d time.Duration) error {
	if d < MinHandOverTimeout || d > MaxHandOverTimeout {
		return fmt.Errorf("--timeout %s is not from %s to %s", d, MinHandOverTimeout, MaxHandOverTimeout)
	}
	return nil
}

// HandOver is `ferrofed audit drain` (docs/audit-spool.md, "Hand-over"): it opens
// every spool cfg names (audit.spool_dir, audit.feed.spool_dir), taking each one's
// lock, and delivers what they hold exactly as the gateway does (the same delivery
// loops, batches, retries, backoff and quarantine), until every spool holds nothing
// undelivered or Timeout passes; then it closes them, deleting nothing undelivered.
//
// The error is for what is wrong before any spool is touched: no spool configured
// (ErrNoSpool, naming the key), a wrong timeout, a credential file that cannot be read.
// Everything after is in the result: outcome empty (nothing undelivered, nothing in
// quarantine), timeout (records left), or failed (a spool that could not be opened,
// held by another process: nothing delivered from any; a quarantine that holds
// entries, which no delivery can empty; a cursor that could not be written).
func HandOver(ctx context.Context, cfg *config.Config, o HandOverOptions) (HandOverResult, error) {
	if o.Timeout == 0 {
		o.Timeout = DefaultHandOverTimeout
	}
	if err := ValidateHandOverTimeout(o.Timeout); err != nil {
		return HandOverResult{}, err
	}
	switch {
	case cfg == nil || cfg.Audit == nil:
		return HandOverResult{}, fmt.Errorf("%w: the configuration has no [audit] table (audit.spool_dir)", ErrNoSpool)
	case cfg.Audit.Destination != config.AuditToRepository:
		return HandOverResult{}, fmt.Errorf("%w: audit.destination is %q, and only %q spools (audit.spool_dir)",
			ErrNoSpool, cfg.Audit.Destination, config.AuditToRepository)
	}
	to := o.Trail
	to.Tracker = dependencies.NewTracker()
	to.Authorize = func(*gin.Context) {}
	t, err := New(cfg, to)
	if err != nil {
		return HandOverResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	err = t.existing()
	var loops []*deliver.Loop
	if err == nil {
		loops, err = t.open()
	}
	if err != nil {
		return HandOverResult{Message: lifecycle.HandOverMessage{Outcome: lifecycle.HandOverFailed, Left: []lifecycle.SpoolLeft{}},
			Err: err, Exit: ExitFailed}, nil
	}
	t.run(loops)
	t.waitEmpty(ctx)
	return t.closeHandOver(), nil
}

// existing refuses a spool folder that does not exist: a hand-over never makes one,
// since a volume mounted elsewhere than the configuration says would look empty.
func (t *Trail) existing() error {
	fsys := t.opts.FS
	if fsys == nil {
		fsys = spool.OS
	}
	for _, d := range t.dests {
		key := "audit.spool_dir"
		if d.short == "feed" {
			key = "audit.feed.spool_dir"
		}
		if _, err := fsys.ReadDir(d.dir); err != nil {
			return fmt.Errorf("audit: the spool of %s, %s (%s), cannot be read: %w; a hand-over opens only a spool a gateway made",
				d.key, d.dir, key, err)
		}
	}
	return nil
}

// waitEmpty returns once no spool holds a record undelivered, or ctx ended.
func (t *Trail) waitEmpty(ctx context.Context) {
	tick := time.NewTicker(handOverPoll)
	defer tick.Stop()
	for {
		empty := true
		for _, d := range t.dests {
			if sp := d.sp.Load(); sp != nil && sp.Snapshot().Pending > 0 {
				empty = false
			}
		}
		if empty {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// closeHandOver stops every delivery and closes every spool (the cursor written,
// nothing deleted), and says what the hand-over did.
func (t *Trail) closeHandOver() HandOverResult {
	res := HandOverResult{Message: lifecycle.HandOverMessage{Outcome: lifecycle.HandOverEmpty}}
	var closeErrs, quarantine []error
	pending := 0
	for _, d := range t.dests {
		if err := t.stop(context.Background(), d); err != nil {
			closeErrs = append(closeErrs, fmt.Errorf("%s: close the spool in %s: %w", d.key, d.dir, err))
		}
		c := d.left.Load()
		if c == nil {
			continue
		}
		s := HandOverSpool{Key: d.key, Dir: d.dir, Delivered: c.delivered, Left: spoolLeft(d.short, c.snap),
			Pending: c.snap.Pending, Quarantined: c.snap.Quarantined}
		res.Spools = append(res.Spools, s)
		res.Message.Delivered += s.Delivered
		res.Message.Left = append(res.Message.Left, s.Left)
		pending += s.Pending
		if s.Quarantined > 0 {
			quarantine = append(quarantine, fmt.Errorf("%s: the quarantine of %s holds %d entries, which no delivery empties: "+
				"a gateway on this spool lists, retries or drops them (docs/audit-spool.md, \"Hand-over\")", d.key, d.dir, s.Quarantined))
		}
	}
	var quarantined int
	for _, sp := range res.Spools {
		quarantined += sp.Quarantined
	}
	res.Message.Outcome, res.Exit = handOverOutcome(len(closeErrs) > 0, pending, quarantined)
	switch res.Exit {
	case ExitFailed:
		// The cursor may not say what was delivered: a next run delivers it again.
		res.Err = errors.Join(closeErrs...)
	case ExitQuarantine:
		res.Err = errors.Join(quarantine...)
	}
	if res.Message.Left == nil {
		res.Message.Left = []lifecycle.SpoolLeft{}
	}
	return res
}

// handOverOutcome is the rule of a hand-over's outcome and exit, once its spools are
// closed: a cursor that could not be written fails it (what was delivered may be sent
// again: never "empty"); records undelivered are a timeout (a later run may deliver
// them); a quarantine that holds entries, with nothing else left, is failed, since no
// delivery empties it; else empty.
func handOverOutcome(closeFailed bool, pending, quarantined int) (outcome string, exit int) {
	switch {
	case closeFailed:
		return lifecycle.HandOverFailed, ExitFailed
	case pending > 0:
		return lifecycle.HandOverTimeout, ExitTimeout
	case quarantined > 0:
		return lifecycle.HandOverFailed, ExitQuarantine
	}
	return lifecycle.HandOverEmpty, ExitEmpty
}
