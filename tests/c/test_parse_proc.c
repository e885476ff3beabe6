/* test_parse_proc.c — /proc/stat, /proc/meminfo, /proc/net/dev, key-value and
 * single-number files: good, malformed and truncated input. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "parse.h"

#define S(x) x, sizeof(x) - 1

/* a device list of single digits, for sm__visible_walk */
static int match_digit(const char *tok, void *arg)
{
    (void)arg;
    return tok[0] >= '0' && tok[0] <= '9' && !tok[1] ? tok[0] - '0' : -1;
}

int main(void)
{
    sm_cpu_times a, b;
    uint64_t t, av, rx, tx, v;
    int est, unl;

    /* /proc/stat: psutil's formula */
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3 4\n"), &a), 0);
    CHECK_EQ_INT(a.nfields, 10);
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpu  150 0 150 850 50 0 0 0 20 0\n"), &b), 0);
    /* deltas: user 50 sys 50 idle 50 iowait 50 guest 20 -> total 200, busy 100 */
    CHECK_NEAR(sm__cpu_percent(&a, &b), 50.0, 1e-9);
    /* negative deltas clamp at 0; equal samples give 0 */
    CHECK_NEAR(sm__cpu_percent(&b, &a), 0.0, 1e-9);
    CHECK_NEAR(sm__cpu_percent(&a, &a), 0.0, 1e-9);
    /* old kernel: 4 fields */
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpu 1 2 3 4\n"), &a), 0);
    CHECK_EQ_INT(a.nfields, 4);
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpu 1 2 3\n"), &a), -EINVAL);
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpux 1 2 3 4\n"), &a), -EINVAL);
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpu 1 2 x 4\n"), &a), -EINVAL);
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpu 1 2 3 4a\n"), &a), -EINVAL);
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpu 99999999999999999999 2 3 4\n"), &a), -ERANGE);
    CHECK_EQ_INT(sm__parse_proc_stat(S(""), &a), -EINVAL);
    CHECK_EQ_INT(sm__parse_proc_stat(S("cpu "), &a), -EINVAL);
    /* the parser stops at len: a truncated buffer is not over-read */
    CHECK_EQ_INT(sm__parse_proc_stat("cpu 1 2 3 4 5", 9, &a), -EINVAL);

    /* /proc/meminfo */
    CHECK_EQ_INT(sm__parse_meminfo(S("MemTotal:       16000 kB\nMemFree:  1000 kB\n"
                                    "MemAvailable:    4000 kB\nBuffers: 1 kB\n"),
                                  &t, &av, &est),
                 0);
    CHECK_EQ_INT(t, 16000ull * 1024);
    CHECK_EQ_INT(av, 4000ull * 1024);
    CHECK_EQ_INT(est, 0);
    /* no MemAvailable (before 3.14): free + buffers + cached */
    CHECK_EQ_INT(sm__parse_meminfo(S("MemTotal: 100 kB\nMemFree: 10 kB\nBuffers: 5 kB\n"
                                    "Cached: 20 kB\nSwapCached: 999 kB\n"),
                                  &t, &av, &est),
                 0);
    CHECK_EQ_INT(av, 35ull * 1024);
    CHECK_EQ_INT(est, 1);
    CHECK_EQ_INT(sm__parse_meminfo(S("MemFree: 10 kB\n"), &t, &av, &est), -ENOENT);
    CHECK_EQ_INT(sm__parse_meminfo(S("MemTotal: lots kB\n"), &t, &av, &est), -EINVAL);
    CHECK_EQ_INT(sm__parse_meminfo(S("MemTotal: 100 MB\nMemAvailable: 1 kB\n"), &t, &av, &est),
                 -EINVAL);
    CHECK_EQ_INT(sm__parse_meminfo(S("MemTotal: 0 kB\nMemAvailable: 0 kB\n"), &t, &av, &est),
                 -ENOENT);
    CHECK_EQ_INT(sm__parse_meminfo(S(""), &t, &av, &est), -ENOENT);
    /* available above total is clamped (the percentage never goes negative) */
    CHECK_EQ_INT(sm__parse_meminfo(S("MemTotal: 10 kB\nMemAvailable: 20 kB\n"), &t, &av, &est), 0);
    CHECK_EQ_INT(av, t);

    /* /proc/net/dev */
    {
        const char dev[] =
            "Inter-|   Receive                                                |  Transmit\n"
            " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets "
            "errs drop fifo colls carrier compressed\n"
            "    lo:    1000      10    0    0    0     0          0         0     1000      10 "
            "   0    0    0     0       0          0\n"
            "  eth0: 2000000    1500    0    0    0     0          0         0   500000    1200 "
            "   0    0    0     0       0          0\n";
        CHECK_EQ_INT(sm__parse_net_dev(dev, sizeof dev - 1, &rx, &tx), 0);
        CHECK_EQ_INT(rx, 2001000);
        CHECK_EQ_INT(tx, 501000);
        /* truncated in the middle of eth0's fields */
        CHECK(sm__parse_net_dev(dev, sizeof dev - 60, &rx, &tx) < 0);
    }
    CHECK_EQ_INT(sm__parse_net_dev(S("Inter-| Receive\n face |bytes\n"), &rx, &tx), -ENOENT);
    CHECK_EQ_INT(sm__parse_net_dev(S("eth0: 1 2 3\n"), &rx, &tx), -EINVAL);

    /* key value files: exact key match */
    {
        const char stat[] = "active_file 100\ninactive_file 200\ntotal_inactive_file 300\n";
        CHECK_EQ_INT(sm__parse_kv(S(stat), "inactive_file", &v), 0);
        CHECK_EQ_INT(v, 200);
        CHECK_EQ_INT(sm__parse_kv(S(stat), "active_file", &v), 0);
        CHECK_EQ_INT(v, 100);
        CHECK_EQ_INT(sm__parse_kv(S(stat), "total_inactive_file", &v), 0);
        CHECK_EQ_INT(v, 300);
        CHECK_EQ_INT(sm__parse_kv(S(stat), "file", &v), -ENOENT);
        CHECK_EQ_INT(sm__parse_kv(S("oom_kill x\n"), "oom_kill", &v), -EINVAL);
        CHECK_EQ_INT(sm__parse_kv(S("oom_kill 3 4\n"), "oom_kill", &v), -EINVAL);
        CHECK_EQ_INT(sm__parse_kv(S("oom_kill"), "oom_kill", &v), -ENOENT);
    }

    /* single numbers */
    CHECK_EQ_INT(sm__parse_number(S("536870912\n"), &v, &unl), 0);
    CHECK_EQ_INT(v, 536870912);
    CHECK_EQ_INT(unl, 0);
    CHECK_EQ_INT(sm__parse_number(S("max\n"), &v, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(sm__parse_number(S("-1\n"), &v, &unl), 0);
    CHECK_EQ_INT(unl, 1);
    CHECK_EQ_INT(sm__parse_number(S("9223372036854771712\n"), &v, &unl), 0);
    CHECK_EQ_INT(sm__parse_number(S("\n"), &v, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_number(S("12abc\n"), &v, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_number(S("maxx"), &v, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_number(S("-"), &v, &unl), -EINVAL);
    CHECK_EQ_INT(sm__parse_number(S("18446744073709551616"), &v, &unl), -ERANGE);

    /* /proc/PID/stat: fields after the LAST ')' (comm may hold ") (") */
    {
        const char st[] = "4242 (evil) (x y) R 17 4242 4242 0 -1 4194560 100 9 3 9 "
                          "1234 56 7 8 20 0 3 0 98765 1000 50 18446744073709551615\n";
        const char kthread[] = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 "
                               "10\n"; /* exactly 22 fields (older kernels end early) */
        sm_pid_stat ps;
        CHECK_EQ_INT(sm__parse_pid_stat(S(st), &ps), 0);
        CHECK_EQ_INT(ps.pid, 4242);
        CHECK_EQ_INT(ps.ppid, 17);
        CHECK_EQ_INT(ps.state, 'R');
        CHECK_EQ_INT(ps.minflt, 100); /* fields 10 and 12; 11 and 13 are the children's */
        CHECK_EQ_INT(ps.majflt, 3);
        CHECK_EQ_INT(ps.utime, 1234);
        CHECK_EQ_INT(ps.stime, 56);
        CHECK_EQ_INT(ps.cutime, 7);
        CHECK_EQ_INT(ps.cstime, 8);
        CHECK_EQ_INT(ps.starttime, 98765);
        CHECK_EQ_INT(ps.rss_pages, 50); /* field 24; field 23 (vsize, 1000) skipped */
        CHECK_EQ_INT(sm__parse_pid_stat(S(kthread), &ps), 0);
        CHECK_EQ_INT(ps.ppid, 0);
        CHECK_EQ_INT(ps.starttime, 10);
        CHECK_EQ_INT(ps.rss_pages, 0); /* the line stops before field 24 */
        /* a malformed vsize or rss: the line is refused, never half read */
        CHECK_EQ_INT(sm__parse_pid_stat(S("9 (a) S 1 1 1 0 -1 0 0 0 0 0 5 6 7 8 20 0 1 0 3 1x 2\n"),
                                       &ps), -EINVAL);
        /* a negative rss reads 0, as a negative c*time does */
        CHECK_EQ_INT(sm__parse_pid_stat(S("9 (a) S 1 1 1 0 -1 0 0 0 0 0 5 6 7 8 20 0 1 0 3 1 -2\n"),
                                       &ps), 0);
        CHECK_EQ_INT(ps.rss_pages, 0);
        /* a negative c*time reads 0 */
        CHECK_EQ_INT(sm__parse_pid_stat(S("9 (a) S 1 1 1 0 -1 0 0 0 0 0 5 6 -7 -8 20 0 1 0 3\n"),
                                       &ps), 0);
        CHECK_EQ_INT(ps.cutime, 0);
        CHECK_EQ_INT(ps.utime, 5);
        /* every truncation of a good line fails cleanly (a prefix that ends
         * inside the last field still parses that field's digits) */
        for (size_t n = 0; n + 1 < sizeof st - 1; n++) {
            int rc = sm__parse_pid_stat(st, n, &ps);
            CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
        }
        CHECK_EQ_INT(sm__parse_pid_stat(S("9 (a S 1\n"), &ps), -EINVAL);  /* no ')' */
        CHECK_EQ_INT(sm__parse_pid_stat(S("9 (a) S 1 1\n"), &ps), -EINVAL); /* fields missing */
        CHECK_EQ_INT(sm__parse_pid_stat(S("x (a) S 1\n"), &ps), -EINVAL);
        CHECK_EQ_INT(sm__parse_pid_stat(S("0 (a) S 1 1 1 0 -1 0 0 0 0 0 5 6 7 8 20 0 1 0 3\n"),
                                       &ps), -ERANGE);
        CHECK_EQ_INT(sm__parse_pid_stat(S("9 (a) S 1 1 1 0 -1 0 0 0 0 0 5x 6 7 8 20 0 1 0 3\n"),
                                       &ps), -EINVAL);
    }

    /* field 52, exit_code: the wait status of a zombie (the companion, cli/cmd_companion.c) */
    {
        /* a SIGKILLed python's line (5.10), comm with ") (" in it */
        const char z[] = "77 (py ) (x) Z 1 77 77 0 -1 4228108 9 0 0 0 3 1 0 0 20 0 1 0 5 0 0 "
                         "18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 "
                         "0 0 9\n";
        const char ex[] = "77 (p) Z 1 77 77 0 -1 4228108 9 0 0 0 3 1 0 0 20 0 1 0 5 0 0 "
                          "18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 "
                          "0 0 768";
        const char old[] = "77 (p) Z 1 77 77 0 -1 4228108 9 0 0 0 3 1 0 0 20 0 1 0 5 0 0\n";
        int status = -1;
        CHECK_EQ_INT(sm__parse_exit_code(S(z), &status), 0);
        CHECK_EQ_INT(status, 9);
        CHECK_EQ_INT(sm__parse_exit_code(S(ex), &status), 0);
        CHECK_EQ_INT(status, 768); /* exit(3) */
        CHECK_EQ_INT(sm__parse_exit_code(S(old), &status), -ENOENT);
        CHECK_EQ_INT(sm__parse_exit_code(S("77 (p Z 1"), &status), -EINVAL);
        for (size_t n = 0; n + 1 < sizeof z - 1; n++) {
            int rc = sm__parse_exit_code(z, n, &status);
            CHECK(rc == 0 || rc == -EINVAL || rc == -ENOENT);
        }
    }

    /* "Key: N kB" lines: smaps_rollup's Pss, status's VmRSS */
    {
        const char ro[] = "55d0c0a00000-7ffd4a1ff000 ---p 00000000 00:00 0   [rollup]\n"
                          "Rss:               9000 kB\nPss_Anon:   10 kB\nPss:   4321 kB\n"
                          "SwapPss:       0 kB\n";
        CHECK_EQ_INT(sm__parse_kb(S(ro), "Pss:", &v), 0);
        CHECK_EQ_INT(v, 4321);
        CHECK_EQ_INT(sm__parse_kb(S(ro), "Rss:", &v), 0);
        CHECK_EQ_INT(v, 9000);
        CHECK_EQ_INT(sm__parse_kb(S("VmRSS:\t  1500 kB\n"), "VmRSS:", &v), 0);
        CHECK_EQ_INT(v, 1500);
        CHECK_EQ_INT(sm__parse_kb(S("SwapPss: 3 kB\n"), "Pss:", &v), -ENOENT);
        CHECK_EQ_INT(sm__parse_kb(S("Pss: 3\n"), "Pss:", &v), -EINVAL);
        CHECK_EQ_INT(sm__parse_kb(S("Pss: 3 MB\n"), "Pss:", &v), -EINVAL);
        CHECK_EQ_INT(sm__parse_kb(S("Pss: x kB\n"), "Pss:", &v), -EINVAL);
        CHECK_EQ_INT(sm__parse_kb(S("Pss: 18446744073709551615 kB\n"), "Pss:", &v), -ERANGE);
        CHECK_EQ_INT(sm__parse_kb(S(""), "Pss:", &v), -ENOENT);
    }

    /* children lists */
    {
        const char ch[] = "101 2050 7 \n";
        size_t pos = 0;
        int pid;
        CHECK_EQ_INT(sm__pid_list_next(S(ch), &pos, &pid), 1);
        CHECK_EQ_INT(pid, 101);
        CHECK_EQ_INT(sm__pid_list_next(S(ch), &pos, &pid), 1);
        CHECK_EQ_INT(pid, 2050);
        CHECK_EQ_INT(sm__pid_list_next(S(ch), &pos, &pid), 1);
        CHECK_EQ_INT(pid, 7);
        CHECK_EQ_INT(sm__pid_list_next(S(ch), &pos, &pid), 0);
        CHECK_EQ_INT(sm__pid_list_next(S(ch), &pos, &pid), 0);
        pos = 0;
        CHECK_EQ_INT(sm__pid_list_next(S(""), &pos, &pid), 0);
        pos = 0;
        CHECK_EQ_INT(sm__pid_list_next(S("12x"), &pos, &pid), -EINVAL);
        pos = 0;
        CHECK_EQ_INT(sm__pid_list_next(S("0 "), &pos, &pid), -ERANGE);
        pos = 0;
        CHECK_EQ_INT(sm__pid_list_next(S("99999999999 "), &pos, &pid), -ERANGE);
    }

    /* *_VISIBLE_DEVICES lists: entries trimmed, cut, and CUDA's rule that the
     * list ends at the first entry naming no device */
    {
        char e[8], chosen[4], stop[16];
        sm__list_entry(" \t1 ,2", e, sizeof e);
        CHECK_EQ_STR(e, "1");
        sm__list_entry("", e, sizeof e);
        CHECK_EQ_STR(e, "");
        sm__list_entry(",3", e, sizeof e);
        CHECK_EQ_STR(e, "");
        sm__list_entry("0123456789abc", e, sizeof e);
        CHECK_EQ_STR(e, "0123456");

        memset(chosen, 0, sizeof chosen);
        sm__visible_walk("2, 0,x,1", match_digit, NULL, chosen, 4, stop, sizeof stop);
        CHECK(chosen[0] && !chosen[1] && chosen[2] && !chosen[3]);
        CHECK_EQ_STR(stop, "x");
        memset(chosen, 0, sizeof chosen);
        sm__visible_walk("3,9", match_digit, NULL, chosen, 4, stop, sizeof stop);
        CHECK(chosen[3]);
        CHECK_EQ_STR(stop, "9"); /* an index past the devices names none */
        memset(chosen, 0, sizeof chosen);
        sm__visible_walk("1,1,", match_digit, NULL, chosen, 4, stop, sizeof stop);
        CHECK(chosen[1]);
        CHECK_EQ_STR(stop, ""); /* a trailing comma: an empty entry ends it */
        memset(chosen, 0, sizeof chosen);
        sm__visible_walk("", match_digit, NULL, chosen, 4, stop, sizeof stop);
        CHECK(!chosen[0] && !chosen[1] && !chosen[2] && !chosen[3]);
    }
    /* /proc/PID/environ: NUL-separated, the last entry possibly cut */
    {
        int r = -1;
        CHECK_EQ_INT(sm__environ_int(S("PATH=/bin\0RANK=3\0LOCAL_RANK=1\0"), "RANK", &r), 0);
        CHECK_EQ_INT(r, 3);
        CHECK_EQ_INT(sm__environ_int(S("LOCAL_RANK=1\0XRANK=2\0"), "RANK", &r), -ENOENT);
        CHECK_EQ_INT(sm__environ_int(S("A=b\0RANK=7"), "RANK", &r), 0); /* cut read */
        CHECK_EQ_INT(r, 7);
        CHECK_EQ_INT(sm__environ_int(S("RANK=\0"), "RANK", &r), -EINVAL);
        CHECK_EQ_INT(sm__environ_int(S("RANK=3x\0"), "RANK", &r), -EINVAL);
        CHECK_EQ_INT(sm__environ_int(S("RANK=2147483648\0"), "RANK", &r), -ERANGE);
        CHECK_EQ_INT(sm__environ_int(S(""), "RANK", &r), -ENOENT);
    }
    /* amdgpu pp_dpm_sclk / pp_dpm_mclk: the level marked current */
    CHECK_EQ_INT(sm__parse_pp_dpm(S("0: 500Mhz\n1: 800Mhz *\n2: 1700Mhz\n"), &v), 0);
    CHECK_EQ_INT(v, 800);
    CHECK_EQ_INT(sm__parse_pp_dpm(S("S: 19Mhz *\n0: 96Mhz\n"), &v), 0); /* deep sleep */
    CHECK_EQ_INT(v, 19);
    CHECK_EQ_INT(sm__parse_pp_dpm(S("0: 96Mhz\n1: 456Mhz\n"), &v), -ENOENT);
    CHECK_EQ_INT(sm__parse_pp_dpm(S("0: 96MHz *"), &v), 0);
    CHECK_EQ_INT(v, 96);
    CHECK_EQ_INT(sm__parse_pp_dpm(S("0: 96Ghz *\n"), &v), -EINVAL);
    CHECK_EQ_INT(sm__parse_pp_dpm(S("garbage\n"), &v), -EINVAL);

    /* DRM fdinfo (drm-usage-stats.rst): an amdgpu client of kernel 6.14+,
     * one of before 6.11 (drm-memory-vram only), a pipe's fdinfo, bad values */
    {
        sm_drm_fdinfo fi;
        CHECK_EQ_INT(sm__parse_drm_fdinfo(S("pos:\t0\nflags:\t02100002\nmnt_id:\t25\n"
            "drm-driver:\tamdgpu\ndrm-client-id:\t42\ndrm-pdev:\t0000:0b:00.0\n"
            "pasid:\t32770\ndrm-total-vram:\t4096 KiB\ndrm-shared-vram:\t0\n"
            "drm-resident-vram:\t3072 KiB\ndrm-memory-vram:\t3072 KiB\n"
            "drm-engine-gfx:\t1000 ns\n"), &fi), 0);
        CHECK(strcmp(fi.driver, "amdgpu") == 0 && strcmp(fi.pdev, "0000:0b:00.0") == 0);
        CHECK(fi.has_client_id && fi.client_id == 42);
        CHECK(fi.vram_key == SM_DRM_VRAM_RESIDENT && fi.vram_bytes == 3072 * 1024);
        CHECK_EQ_INT(sm__parse_drm_fdinfo(S("drm-driver: amdgpu\ndrm-pdev: 0000:0c:00.0\n"
            "drm-client-id: 7\ndrm-memory-vram: 12 MiB\ndrm-memory-gtt: 3 MiB\n"), &fi), 0);
        CHECK(fi.vram_key == SM_DRM_VRAM_MEMORY && fi.vram_bytes == 12u << 20);
        CHECK_EQ_INT(sm__parse_drm_fdinfo(S("drm-driver: amdgpu\ndrm-total-vram: 100\n"), &fi),
                     0);
        CHECK(fi.vram_key == SM_DRM_VRAM_TOTAL && fi.vram_bytes == 100 && !fi.has_client_id);
        /* a kernel before the memory keys: the client, no VRAM */
        CHECK_EQ_INT(sm__parse_drm_fdinfo(S("drm-driver: amdgpu\ndrm-client-id: 3\n"), &fi), 0);
        CHECK(fi.vram_key == SM_DRM_VRAM_NONE && fi.pdev[0] == '\0');
        CHECK_EQ_INT(sm__parse_drm_fdinfo(S("pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t9\n"),
                                          &fi), -ENOENT);
        CHECK_EQ_INT(sm__parse_drm_fdinfo(S("drm-driver: amdgpu\ndrm-resident-vram: 5 GiB\n"),
                                          &fi), -EINVAL);
        CHECK_EQ_INT(sm__parse_drm_fdinfo(S("drm-driver: amdgpu\ndrm-client-id: 5 KiB\n"), &fi),
                     -EINVAL);
        CHECK_EQ_INT(sm__parse_drm_fdinfo(S("drm-driver: amdgpu\n"
            "drm-resident-vram: 18446744073709551615 KiB\n"), &fi), -ERANGE);
    }

    return CHECK_DONE();
}
