package audit

import (
	"errors"
	"net/http"
	"reflect"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
	"github.com/ferrofed/ferrofed/gateway/config"
)

// MaxListed bounds the quarantine entries one GET lists per destination; the body
// says how many there are in all.
const MaxListed = 1000

// routes are the trail's quarantine routes.
type routes struct{ t *Trail }

// PrepareReload says, for the server's all-or-nothing reload, that a changed [audit]
// needs a restart: the spools and their clients are built once at start. It never
// refuses a reload.
func (t *Trail) PrepareReload(cfg *config.Config) (func(), error) {
	var next config.Audit
	if cfg.Audit != nil {
		next = *cfg.Audit
	}
	if !reflect.DeepEqual(next, t.cfg) {
		t.log.Info("Configuration changed but needs a restart: audit", "key", "audit")
	}
	return func() {}, nil
}

// RegisterOperator registers the quarantine routes behind the operator token, with
// the repository destination only: they are never served open.
func (t *Trail) RegisterOperator(g *gin.RouterGroup) {
	if len(t.dests) == 0 {
		return
	}
	r := &routes{t: t}
	op := g.Group("/audit/quarantine", t.authorize)
	op.GET("", r.list)
	op.POST("/:destination/:id/retry", r.retry)
	op.DELETE("/:destination/:id", r.drop)
}

// listed is one entry of GET {base}/operator/audit/quarantine.
type listed struct {
	Destination string       `json:"destination"`
	ID          string       `json:"id"`
	Reason      spool.Reason `json:"reason"`
}

type listBody struct {
	Entries []listed `json:"entries"`
	// Total counts every entry per destination (more than listed past MaxListed).
	Total map[string]int `json:"total"`
}

func (r *routes) list(c *gin.Context) {
	body := listBody{Entries: []listed{}, Total: map[string]int{}}
	for _, d := range r.t.dests {
		sp := d.sp.Load()
		if sp == nil {
			continue
		}
		entries, total, err := sp.List(MaxListed)
		if err != nil {
			r.t.log.Error(err, "Could not list the audit quarantine", "destination", d.key)
			c.Header("Cache-Control", "no-store")
			c.JSON(http.StatusInternalServerError, gin.H{"error": "quarantine_unreadable", "destination": d.short})
			return
		}
		body.Total[d.short] = total
		for _, e := range entries {
			body.Entries = append(body.Entries, listed{Destination: d.short, ID: e.ID, Reason: e.Reason})
		}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, body)
}

// spoolOf is the destination's open spool, or answers 404.
func (r *routes) spoolOf(c *gin.Context) (*destination, *spool.Spool, bool) {
	for _, d := range r.t.dests {
		if d.short == c.Param("destination") {
			if sp := d.sp.Load(); sp != nil {
				return d, sp, true
			}
		}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusNotFound, gin.H{"error": "no_such_destination", "error_description": "the destination is repository or feed, when configured"})
	return nil, nil, false
}

func (r *routes) retry(c *gin.Context) {
	d, sp, ok := r.spoolOf(c)
	if !ok {
		return
	}
	id := c.Param("id")
	_, err := sp.Retry(c.Request.Context(), id)
	r.answer(c, d, "Retried", id, err)
}

func (r *routes) drop(c *gin.Context) {
	d, sp, ok := r.spoolOf(c)
	if !ok {
		return
	}
	id := c.Param("id")
	r.answer(c, d, "Dropped", id, sp.Drop(id))
}

func (r *routes) answer(c *gin.Context, d *destination, did, id string, err error) {
	c.Header("Cache-Control", "no-store")
	switch {
	case err == nil:
		r.t.log.Info(did+" a quarantined audit record", "destination", d.key, "id", id)
		c.Status(http.StatusNoContent)
	case errors.Is(err, spool.ErrNoEntry):
		c.JSON(http.StatusNotFound, gin.H{"error": "no_such_entry"})
	case errors.Is(err, spool.ErrNotRetryable):
		c.JSON(http.StatusConflict, gin.H{"error": "not_retryable", "error_description": "the entry is damaged bytes, not a record: it can only be dropped"})
	default:
		r.t.log.Error(err, "Could not act on a quarantined audit record", "destination", d.key, "id", id)
		c.JSON(http.StatusServiceUnavailable, gin.H{"error": "spool_failed"})
	}
}
