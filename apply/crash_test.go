package apply_test

func childMain() int { return 0 }
