package storedquery

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/health"
)

// PrepareReload says that a changed [stored_queries] needs a restart; it never
// refuses a reload.
func (q *Queries) PrepareReload(cfg *config.Config) (func(), error) {
	if cfg.StoredQueries == nil || cfg.StoredQueries.Dir != q.store.Dir() || cfg.StoredQueries.DriftInterval() != q.interval {
		q.log.Info("Configuration changed but needs a restart: stored_queries", "key", "stored_queries")
	}
	return func() {}, nil
}

// Checks is the readiness check stored_queries: the store was loaded and can be read.
// A member's drift never fails it.
func (q *Queries) Checks() []health.Check {
	return []health.Check{health.NamedCheck("stored_queries", func(context.Context) error { return q.store.Readable() })}
}

// RegisterOperator registers {base}/operator/stored-queries behind the operator token.
func (q *Queries) RegisterOperator(g *gin.RouterGroup) {
	op := g.Group("/stored-queries", q.authorize)
	op.GET("", q.list)
	op.POST("", q.upload)
	op.GET("/:id", q.read)
	op.PUT("/:id", q.upload)
	op.DELETE("/:id", q.remove)
	op.POST("/:id/repair", q.repair)
}

// Listed is one entry of GET {base}/operator/stored-queries.
type Listed struct {
	ID       string `json:"id"`
	Code     string `json:"code"`
	Resource string `json:"resource"`
	URL      string `json:"url,omitempty"`
	Version  string `json:"version,omitempty"`
	Digest   string `json:"digest"`
	// Drift is this process's last result per member (drift check, upload, repair);
	// absent before any.
	Drift map[string]MemberResult `json:"drift,omitempty"`
}

// ListBody is the body of GET {base}/operator/stored-queries.
type ListBody struct {
	StoredQueries []Listed `json:"stored_queries"`
	// Problems are the store's files that could not be used.
	Problems []Problem `json:"problems,omitempty"`
}

// Answer is the body of an upload, a delete and a repair: the stored query and each
// member's part.
type Answer struct {
	ID      string                  `json:"id"`
	Code    string                  `json:"code,omitempty"`
	Digest  string                  `json:"digest,omitempty"`
	Members map[string]MemberResult `json:"members"`
}

func (q *Queries) list(c *gin.Context) {
	defs, problems, err := q.store.List()
	if err != nil {
		q.unreadable(c, err)
		return
	}
	body := ListBody{StoredQueries: make([]Listed, 0, len(defs)), Problems: problems}
	for _, d := range defs {
		l := Listed{ID: d.ID, Code: d.Code, Resource: d.Resource, URL: d.URL, Version: d.Version, Digest: d.Digest}
		if dr := q.Drift(d.ID); len(dr) > 0 {
			l.Drift = dr
		}
		body.StoredQueries = append(body.StoredQueries, l)
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, body)
}

func (q *Queries) read(c *gin.Context) {
	d, ok := q.get(c)
	if !ok {
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Header("ETag", `"`+d.Digest+`"`)
	c.Data(http.StatusOK, "application/fhir+json", d.Raw)
}

// get is the stored query the path names, or answers 404 (503 for a store that
// cannot be read).
func (q *Queries) get(c *gin.Context) (*Definition, bool) {
	d, err := q.store.Get(c.Param("id"))
	switch {
	case errors.Is(err, ErrNotFound):
		fail(c, http.StatusNotFound, "no_such_stored_query", "no stored query has this id")
		return nil, false
	case err != nil:
		q.unreadable(c, err)
		return nil, false
	}
	return d, true
}

func (q *Queries) upload(c *gin.Context) {
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, MaxDefinitionBytes+1))
	if err != nil {
		fail(c, http.StatusBadRequest, "unreadable_body", "the body could not be read")
		return
	}
	if len(body) > MaxDefinitionBytes {
		c.Header("Connection", "close") // the rest of the body is never read
		fail(c, http.StatusRequestEntityTooLarge, "too_large", ErrTooLarge.Error())
		return
	}
	d, err := Parse(body)
	if err != nil {
		fail(c, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	if id := c.Param("id"); id != "" && id != d.ID {
		fail(c, http.StatusBadRequest, "invalid", "the path names "+id+" but the OperationDefinition's id is "+d.ID)
		return
	}
	created, err := q.store.Put(d)
	if err != nil {
		q.refused(c, d.ID, err)
		return
	}
	q.log.Info("Stored a stored query", "stored_query", d.ID, "code", d.Code, "digest", d.Digest, "created", created)
	res := distribute(c.Request.Context(), q.members, d)
	q.record(d.ID, res)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(status, Answer{ID: d.ID, Code: d.Code, Digest: d.Digest, Members: res})
}

func (q *Queries) remove(c *gin.Context) {
	d, ok := q.get(c)
	if !ok {
		return
	}
	if err := q.store.Delete(d.ID); err != nil {
		q.refused(c, d.ID, err)
		return
	}
	q.log.Info("Deleted a stored query", "stored_query", d.ID)
	res := withdraw(c.Request.Context(), q.members, d.ID)
	q.mu.Lock()
	delete(q.drift, d.ID)
	q.mu.Unlock()
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, Answer{ID: d.ID, Members: res})
}

func (q *Queries) repair(c *gin.Context) {
	d, ok := q.get(c)
	if !ok {
		return
	}
	res := repair(c.Request.Context(), q.members, d)
	q.record(d.ID, res)
	q.log.Info("Repaired a stored query on the members", "stored_query", d.ID)
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, Answer{ID: d.ID, Code: d.Code, Digest: d.Digest, Members: res})
}

// refused answers a write the store refused.
func (q *Queries) refused(c *gin.Context, id string, err error) {
	switch {
	case errors.Is(err, ErrReadOnly):
		c.Header("Cache-Control", "no-store")
		c.JSON(http.StatusConflict, gin.H{
			"error": "store_read_only",
			"error_description": "stored_queries.dir is read-only: this gateway's stored queries are StoredQuery resources (ferrofed.io/v1alpha1) rendered by the operator; " +
				"apply (or delete) the StoredQuery that names this Gateway and holds the definition instead",
			"resource": gin.H{"apiVersion": "ferrofed.io/v1alpha1", "kind": "StoredQuery", "name": id},
		})
	case errors.Is(err, ErrCodeTaken), errors.Is(err, ErrFull):
		fail(c, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, ErrNotFound):
		fail(c, http.StatusNotFound, "no_such_stored_query", "no stored query has this id")
	default:
		q.log.Error(err, "Could not write the stored-query store", "stored_query", id)
		fail(c, http.StatusServiceUnavailable, "store_failed", "the stored-query store could not be written")
	}
}

func (q *Queries) unreadable(c *gin.Context, err error) {
	q.log.Error(err, "Could not read the stored-query store")
	fail(c, http.StatusServiceUnavailable, "store_unreadable", "the stored-query store cannot be read")
}

func fail(c *gin.Context, status int, code, description string) {
	c.Header("Cache-Control", "no-store")
	c.JSON(status, gin.H{"error": code, "error_description": description})
}
