package storedquery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
)

// Options build Queries.
type Options struct {
	Logger logr.Logger
	// Recorder stores the AuditEvent of each exchange with a member about a stored
	// query (the audit trail); nil records nothing.
	Recorder bindings.Recorder
	// Members are the members to reach (the federation surface); required.
	Members Members
	// Authorize is the operator-token check of the routes; required: they are never
	// served open.
	Authorize gin.HandlerFunc
}

// Expander is the `_query` expansion the federation asks for: the store
// [stored_queries] names, read. It is made before the federation, and Queries, which
// reach the members through the federation, after it.
type Expander struct {
	log   logr.Logger
	store *Store
}

// Load reads the store [stored_queries] names; nil without the table. Nothing is
// sent.
func Load(cfg *config.Config, log logr.Logger) (*Expander, error) {
	if cfg == nil || cfg.StoredQueries == nil {
		return nil, nil
	}
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	st, err := NewStore(cfg.StoredQueries.Dir)
	if err != nil {
		return nil, fmt.Errorf("stored queries: %w", err)
	}
	if _, problems, _ := st.List(); len(problems) > 0 {
		for _, p := range problems {
			log.Info("Left out a file of the stored-query store", "file", p.File, "reason", p.Error)
		}
	}
	return &Expander{log: log, store: st}, nil
}

// Queries is the stored queries of one gateway: the store, the operator routes, the
// readiness check `stored_queries` and the drift check run on
// stored_queries.drift_interval_ms. A gateway without [stored_queries] has none.
type Queries struct {
	log      logr.Logger
	store    *Store
	interval time.Duration

	members   Members
	authorize gin.HandlerFunc

	mu sync.Mutex
	// drift is the last result per stored query and member (drift checks, uploads,
	// repairs); checkedAt is when the last drift check ended.
	drift     map[string]map[string]MemberResult
	checkedAt time.Time

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// New builds the stored queries of cfg on the store x read. Nothing is sent. With a
// Recorder, every exchange with a member about a stored query records its AuditEvent.
func New(cfg *config.Config, x *Expander, o Options) (*Queries, error) {
	if cfg == nil || cfg.StoredQueries == nil || x == nil {
		return nil, errors.New("stored queries: no [stored_queries] table")
	}
	if o.Members == nil || o.Authorize == nil {
		return nil, errors.New("stored queries: no members or operator-token check")
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	members := o.Members
	if o.Recorder != nil {
		members = recording{members: members, rec: o.Recorder, log: o.Logger}
	}
	return &Queries{log: o.Logger, store: x.store, interval: cfg.StoredQueries.DriftInterval(), members: members, authorize: o.Authorize,
		drift: map[string]map[string]MemberResult{}}, nil
}

// Store is the store.
func (q *Queries) Store() *Store { return q.store }

// Store is the store.
func (x *Expander) Store() *Store { return x.store }

// Expand is the federation's QueryExpander: a search naming _query={code} becomes the
// stored query's search.
func (x *Expander) Expand(resourceType, raw string) (string, int, string) {
	code, found, rest, status, msg := splitQuery(raw)
	switch {
	case found && status != 0:
		return "", status, msg
	case !found:
		// No _query (or a query that is not form-encoded, which the federation
		// refuses as it always does).
		return raw, 0, ""
	}
	d, err := x.store.ByCode(code)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", http.StatusNotFound, fmt.Sprintf("no stored query has the code %q", code)
	case err != nil:
		x.log.Error(err, "Could not read the stored-query store")
		return "", http.StatusServiceUnavailable, "the stored-query store cannot be read"
	}
	return d.expand(resourceType, rest)
}

// CheckDrift compares every stored query with every supporting member's copy now,
// keeps the results for the list, and logs each copy that changed result.
func (q *Queries) CheckDrift(ctx context.Context) error {
	defs, _, err := q.store.List()
	if err != nil {
		return err
	}
	res := checkAll(ctx, q.members, defs)
	q.mu.Lock()
	defer q.mu.Unlock()
	for id, members := range res {
		for member, r := range members {
			if prev := q.drift[id][member]; prev.Result != r.Result && (r.Result == Missing || r.Result == Different || prev.Result == Missing || prev.Result == Different) {
				q.log.Info("Stored query drift changed", "stored_query", id, "member", member, "from", prev.Result, "to", r.Result)
			}
		}
	}
	q.drift = res
	q.checkedAt = time.Now()
	return nil
}

// record keeps the results of an upload or a repair of id.
func (q *Queries) record(id string, res map[string]MemberResult) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drift[id] = res
}

// Drift is a copy of the last results of id, per member.
func (q *Queries) Drift(id string) map[string]MemberResult {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]MemberResult, len(q.drift[id]))
	for k, v := range q.drift[id] {
		out[k] = v
	}
	return out
}

// Start starts the drift check: every stored_queries.drift_interval_ms, the first one
// interval after start. Drain step 4 (Stop) ends it.
func (q *Queries) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel, q.done = cancel, make(chan struct{})
	go func() {
		defer close(q.done)
		t := time.NewTicker(q.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := q.CheckDrift(ctx); err != nil && ctx.Err() == nil {
					q.log.Error(err, "Could not check the stored queries for drift")
				}
			}
		}
	}()
}

// Stop ends the drift check, a check under way included, within ctx.
func (q *Queries) Stop(ctx context.Context) error {
	if q.cancel == nil {
		return nil
	}
	q.stopOnce.Do(q.cancel)
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stored queries: the drift check did not stop: %w", ctx.Err())
	}
}
