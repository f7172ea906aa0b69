package ping_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"time"

	"github.com/rs/zerolog"

	"github.com/redbite/leasewrap/ping"
)

// A run's pings: start, then the exit status with the tail of stderr.
func Example() {
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%s %s %q", r.Method, r.URL.Path, body)
	}))
	defer srv.Close()

	p, err := ping.New(srv.URL+"/check-uuid", ping.WithLogger(zerolog.New(os.Stderr)))
	if err != nil {
		fmt.Println(err)
		return
	}
	tail := ping.NewTail(ping.DefaultTailSize)
	cmd := exec.Command("sh", "-c", "echo oops >&2; exit 3")
	cmd.Stderr = io.MultiWriter(os.Stderr, tail) // a pipe now: see the package doc
	cmd.WaitDelay = time.Second

	p.Start()
	_ = cmd.Run()
	p.Finish(cmd.ProcessState.ExitCode(), tail.Bytes())

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(<-got)
	fmt.Println(<-got)
	// Output:
	// POST /check-uuid/start ""
	// POST /check-uuid/3 "oops\n"
}
