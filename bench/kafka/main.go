// Command kafka-bench is the measuring side of `make bench-kafka` (issue
// 15's benchmark): it starts a peer (sluice's Kafka sink, or Kafka Connect
// running Debezium's MariaDB connector), reads the peer's topics with a
// franz-go consumer, and reports events/s, MB/s, the peer's CPU seconds
// and peak RSS and, in the live part, the end-to-end delay of heartbeat
// rows. bench/kafka.sh starts the sandboxes, writes the backlog and calls
// it once per peer and round.
//
//	kafka-bench libs                                     # fetch Connect + Debezium, print the jar dir
//	kafka-bench run -brokers B -expect N -peer 'name=sluice,prefix=sk,committed=1,log=F,cmd=...' -json out.jsonl
//	kafka-bench run ... -peer ... -peer ... -heartbeat DSN -load CMD -count CMD   # live part
//	kafka-bench table -in out.jsonl
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kafka-bench libs|run|table [flags] (-h for each)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "libs":
		var d string
		if d, err = connectLibs(context.Background()); err == nil {
			fmt.Println(d)
		}
	case "run":
		err = runCmd(os.Args[2:])
	case "table":
		err = tableCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q: use libs, run or table", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka-bench:", err)
		os.Exit(1)
	}
}
