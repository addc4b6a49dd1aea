// pynq-kv: C API around a Verilated top module with an AXI4-Lite slave (s_axil_*).
//
// The model class is always `Vtop` (verilator --prefix Vtop); the top module must have
// `clk`, `rst` (synchronous, active high) and the s_axil_* ports of verilog-axis style:
// awaddr/awprot/awvalid/awready, wdata/wstrb/wvalid/wready, bresp/bvalid/bready,
// araddr/arprot/arvalid/arready, rdata/rresp/rvalid/rready, 32-bit data.  Any other input
// stays 0.  pynq_kv/sim.py builds this file with the design into one shared library and
// drives it through ctypes; hw/sim/README.md documents the build.
//
// Clocking: between calls the clock is low and the model is evaluated.  One cycle = inputs
// set while low, rising edge, falling edge.  An AXI handshake counts at a rising edge where
// valid and ready were both high just before it (ready may depend combinationally on valid).
//
// Every bus call is bounded by the instance's timeout (cycles) and returns KVSIM_TIMEOUT
// instead of hanging; the channels it drove are then released (valid low).

#include "Vtop.h"
#include "verilated.h"

#include <cstdint>
#include <memory>

#define KVSIM_API extern "C" __attribute__((visibility("default")))

enum {
    KVSIM_OKAY = 0,
    KVSIM_EXOKAY = 1,
    KVSIM_SLVERR = 2,
    KVSIM_DECERR = 3,
    KVSIM_TIMEOUT = -1,
    KVSIM_BADARG = -2,
};

namespace {

struct Sim {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vtop> top;
    uint64_t cycles = 0;
    uint32_t timeout = 1000;

    Sim() : ctx(new VerilatedContext) {
        ctx->debug(0);
        ctx->randReset(0);  // uninitialised state and inputs are 0
        ctx->fatalOnError(false);
        top.reset(new Vtop{ctx.get(), "top"});
        top->clk = 0;
        top->rst = 0;
        idle();
        top->eval();
    }

    ~Sim() { top->final(); }

    void idle() {
        top->s_axil_awvalid = 0;
        top->s_axil_wvalid = 0;
        top->s_axil_bready = 0;
        top->s_axil_arvalid = 0;
        top->s_axil_rready = 0;
        top->s_axil_awprot = 0;
        top->s_axil_arprot = 0;
    }

    // rising then falling edge; inputs set before the call are sampled at the rising edge
    void cycle() {
        top->clk = 1;
        ctx->timeInc(1);
        top->eval();
        top->clk = 0;
        ctx->timeInc(1);
        top->eval();
        ++cycles;
    }

    int write(uint32_t addr, uint32_t data, uint32_t strb) {
        top->s_axil_awaddr = addr;
        top->s_axil_awvalid = 1;
        top->s_axil_wdata = data;
        top->s_axil_wstrb = strb & 0xF;
        top->s_axil_wvalid = 1;
        top->s_axil_bready = 1;
        top->eval();
        bool aw = true, w = true, b = true;
        int resp = KVSIM_TIMEOUT;
        for (uint32_t n = 0; n < timeout; ++n) {
            // a slave may raise bvalid at the edge that completes aw/w (verilog-axis style)
            const bool aw_hs = aw && top->s_axil_awready;
            const bool w_hs = w && top->s_axil_wready;
            const bool b_hs = b && top->s_axil_bvalid;
            const int bresp = top->s_axil_bresp & 3;
            cycle();
            if (aw_hs) { aw = false; top->s_axil_awvalid = 0; }
            if (w_hs) { w = false; top->s_axil_wvalid = 0; }
            if (b_hs) { b = false; resp = bresp; top->s_axil_bready = 0; }
            top->eval();
            if (!aw && !w && !b) return resp;
        }
        idle();
        top->eval();
        return KVSIM_TIMEOUT;
    }

    int read(uint32_t addr, uint32_t* data) {
        top->s_axil_araddr = addr;
        top->s_axil_arvalid = 1;
        top->s_axil_rready = 1;
        top->eval();
        bool ar = true, r = true;
        int resp = KVSIM_TIMEOUT;
        for (uint32_t n = 0; n < timeout; ++n) {
            // a slave may raise rvalid at the edge that completes ar (verilog-axis style)
            const bool ar_hs = ar && top->s_axil_arready;
            const bool r_hs = r && top->s_axil_rvalid;
            const uint32_t rdata = top->s_axil_rdata;
            const int rresp = top->s_axil_rresp & 3;
            cycle();
            if (ar_hs) { ar = false; top->s_axil_arvalid = 0; }
            if (r_hs) {
                r = false;
                resp = rresp;
                if (data) *data = rdata;
                top->s_axil_rready = 0;
            }
            top->eval();
            if (!ar && !r) return resp;
        }
        idle();
        top->eval();
        if (data) *data = 0;
        return KVSIM_TIMEOUT;
    }
};

}  // namespace

KVSIM_API void* kvsim_create(void) {
    try {
        return new Sim;
    } catch (...) {
        return nullptr;
    }
}

KVSIM_API void kvsim_destroy(void* h) { delete static_cast<Sim*>(h); }

KVSIM_API void kvsim_set_timeout(void* h, uint32_t cycles) {
    static_cast<Sim*>(h)->timeout = cycles ? cycles : 1;
}

// rst high for `cycles` cycles (at least 1) with every bus input idle, then one cycle low
KVSIM_API void kvsim_reset(void* h, uint32_t cycles) {
    Sim* s = static_cast<Sim*>(h);
    s->idle();
    s->top->rst = 1;
    for (uint32_t n = 0; n < (cycles ? cycles : 1); ++n) s->cycle();
    s->top->rst = 0;
    s->cycle();
}

KVSIM_API void kvsim_tick(void* h, uint64_t n) {
    Sim* s = static_cast<Sim*>(h);
    for (uint64_t i = 0; i < n; ++i) s->cycle();
}

KVSIM_API uint64_t kvsim_cycles(void* h) { return static_cast<Sim*>(h)->cycles; }

// returns the AXI response (0 OKAY, 2 SLVERR, 3 DECERR) or KVSIM_TIMEOUT
KVSIM_API int kvsim_write(void* h, uint32_t addr, uint32_t data, uint32_t strb) {
    return static_cast<Sim*>(h)->write(addr, data, strb);
}

KVSIM_API int kvsim_read(void* h, uint32_t addr, uint32_t* data) {
    return static_cast<Sim*>(h)->read(addr, data);
}

// n writes (full strobes); resp[i] gets each response.  Stops at the first timeout.
// Returns the number of transactions done (n unless a timeout occurred).
KVSIM_API int kvsim_write_many(void* h, const uint32_t* addr, const uint32_t* data, int n, int* resp) {
    Sim* s = static_cast<Sim*>(h);
    if (n < 0) return KVSIM_BADARG;
    for (int i = 0; i < n; ++i) {
        const int r = s->write(addr[i], data[i], 0xF);
        if (resp) resp[i] = r;
        if (r == KVSIM_TIMEOUT) return i;
    }
    return n;
}

KVSIM_API int kvsim_read_many(void* h, const uint32_t* addr, uint32_t* data, int n, int* resp) {
    Sim* s = static_cast<Sim*>(h);
    if (n < 0) return KVSIM_BADARG;
    for (int i = 0; i < n; ++i) {
        const int r = s->read(addr[i], &data[i]);
        if (resp) resp[i] = r;
        if (r == KVSIM_TIMEOUT) return i;
    }
    return n;
}

// Read `addr` until (data & mask) == (value & mask), at most max_reads times.
// Returns the number of reads done (> 0) on a match, 0 if it never matched, or the
// negative error of the first read that was not OKAY.  *data gets the last value read.
KVSIM_API int kvsim_poll(void* h, uint32_t addr, uint32_t mask, uint32_t value, int max_reads,
                         uint32_t* data) {
    Sim* s = static_cast<Sim*>(h);
    uint32_t d = 0;
    for (int i = 1; i <= max_reads; ++i) {
        const int r = s->read(addr, &d);
        if (data) *data = d;
        if (r != KVSIM_OKAY) return r == KVSIM_TIMEOUT ? KVSIM_TIMEOUT : -16 - r;
        if ((d & mask) == (value & mask)) return i;
    }
    return 0;
}

// the harness ABI version, checked by pynq_kv/sim.py
KVSIM_API int kvsim_abi_version(void) { return 1; }
