package web_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/web"
)

// BenchmarkJobPage serves the page of a job with 10,000 runs in the
// window, by two holders, read from the real database: the whole page
// view, statements included.
func BenchmarkJobPage(b *testing.B) {
	f := newFleet(b)
	ctx := context.Background()
	for _, sql := range []string{
		`INSERT INTO ` + pgx.Identifier{f.table}.Sanitize() + ` (job_name, holder, expires_at, fencing_token) VALUES ('busy', 'host-a', now(), 10000)`,
		`INSERT INTO ` + f.history + ` (job_name, holder, fencing_token, started_at, finished_at, exit_code, outcome)
SELECT 'busy', CASE WHEN g % 3 = 0 THEN 'host-b' ELSE 'host-a' END, g,
  now() - g * interval '8 second', now() - g * interval '8 second' + interval '5 second',
  CASE WHEN g % 17 = 0 THEN 1 ELSE 0 END, CASE WHEN g % 101 = 0 THEN 'lost' ELSE 'exited' END
FROM generate_series(1, 10000) g`,
		`ANALYZE ` + f.history,
	} {
		if _, err := f.pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	h := web.New(f.reader(f.pool), zerolog.Nop()).Handler()
	req := httptest.NewRequest("GET", "/jobs/busy", nil)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("answered %d: %s", w.Code, w.Body)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
}
