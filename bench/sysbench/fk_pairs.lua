-- fk_pairs.lua: a sysbench workload with foreign keys, for the replication
-- catch-up benchmark with the applier's FK checks on (issue 29). sysbench's
-- own tables have none. Each of --tables pairs is a parent table and a child
-- table whose rows reference it ON DELETE CASCADE ON UPDATE CASCADE; parent p
-- has the children 2p-1 and 2p.
--
-- One event is one transaction, as write_only's: update a parent, update its
-- children, delete another parent (the server cascades to its children, and
-- does not binlog the cascade: a replica must run it itself), and insert that
-- parent and its two children again.
--
--   sysbench bench/sysbench/fk_pairs.lua --tables=4 --table-size=100000 ... prepare|run

sysbench.cmdline.options = {
  tables = {"Number of parent/child table pairs", 1},
  table_size = {"Parent rows per pair (each has two children)", 10000},
}

local function pair(i) return "fkparent" .. i, "fkchild" .. i end

function prepare()
  local con = sysbench.sql.driver():connect()
  for i = 1, sysbench.opt.tables do
    local p, c = pair(i)
    print(string.format("Creating %s and %s (%d parents)", p, c, sysbench.opt.table_size))
    con:query(string.format("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0, pad CHAR(60) NOT NULL DEFAULT '') ENGINE=InnoDB", p))
    con:query(string.format("CREATE TABLE %s (id INT NOT NULL PRIMARY KEY, pid INT NOT NULL, v INT NOT NULL DEFAULT 0, pad CHAR(60) NOT NULL DEFAULT '', KEY (pid), " ..
      "FOREIGN KEY (pid) REFERENCES %s (id) ON DELETE CASCADE ON UPDATE CASCADE) ENGINE=InnoDB", c, p))
    local n = sysbench.opt.table_size
    for lo = 1, n, 1000 do
      local hi = math.min(n, lo + 999)
      local pv, cv = {}, {}
      for id = lo, hi do
        pv[#pv + 1] = string.format("(%d,%d,'%s')", id, id, sysbench.rand.string("###########-###########-###########"))
        cv[#cv + 1] = string.format("(%d,%d,0,'x'),(%d,%d,0,'y')", 2 * id - 1, id, 2 * id, id)
      end
      con:query("INSERT INTO " .. p .. " (id,k,pad) VALUES " .. table.concat(pv, ","))
      con:query("INSERT INTO " .. c .. " (id,pid,v,pad) VALUES " .. table.concat(cv, ","))
    end
  end
end

function cleanup()
  local con = sysbench.sql.driver():connect()
  for i = 1, sysbench.opt.tables do
    local p, c = pair(i)
    con:query("DROP TABLE IF EXISTS " .. c)
    con:query("DROP TABLE IF EXISTS " .. p)
  end
end

function thread_init()
  con = sysbench.sql.driver():connect()
end

function thread_done()
  con:disconnect()
end

function event()
  local p, c = pair(sysbench.rand.uniform(1, sysbench.opt.tables))
  local n = sysbench.opt.table_size
  local a = sysbench.rand.default(1, n)
  local d = sysbench.rand.uniform(1, n)
  con:query("BEGIN")
  con:query(string.format("UPDATE %s SET k=k+1 WHERE id=%d", p, a))
  con:query(string.format("UPDATE %s SET v=v+1 WHERE pid=%d", c, a))
  con:query(string.format("DELETE FROM %s WHERE id=%d", p, d))
  con:query(string.format("INSERT INTO %s (id,k,pad) VALUES (%d,%d,'%s')", p, d, d, sysbench.rand.string("###########-###########-###########")))
  con:query(string.format("INSERT INTO %s (id,pid,v,pad) VALUES (%d,%d,0,'x'),(%d,%d,0,'y')", c, 2 * d - 1, d, 2 * d, d))
  con:query("COMMIT")
end
