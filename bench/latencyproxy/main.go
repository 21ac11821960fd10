// Command latencyproxy is a TCP proxy that adds latency, for the
// replication benchmark (netem is not available on every machine). It runs
// toxiproxy in-process: -latency is added to every reply (downstream), so a
// round trip through the proxy takes that much longer.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "host:port to forward to")
	latency := flag.Int("latency", 20, "milliseconds added to each round trip")
	flag.Parse()
	if *upstream == "" {
		fmt.Fprintln(os.Stderr, "latencyproxy: -upstream is required")
		os.Exit(2)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "latency", *listen, *upstream)
	if err := p.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "latencyproxy:", err)
		os.Exit(2)
	}
	js := fmt.Sprintf(`{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, *latency)
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		fmt.Fprintln(os.Stderr, "latencyproxy:", err)
		os.Exit(2)
	}
	fmt.Println(p.Listen)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	p.Stop()
}
