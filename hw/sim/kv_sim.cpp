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
//
// Ethernet port (optional): when the top also has a MAC-side stream pair -- s_axis_rx_* in
// (tdata/tkeep/tvalid/tready/tlast/tuser) and m_axis_tx_* out (tdata/tkeep/tvalid/tready/tlast),
// byte i of a beat in tdata[8i+7:8i] -- kvsim_eth_send() queues frames that are driven one beat
// per cycle (as a MAC does) and every complete frame the design transmits is queued for
// kvsim_eth_recv().  Both happen inside every clock cycle, whatever else is being driven.  A top
// without those ports builds the same harness; the eth calls then report KVSIM_BADARG.

#include "Vtop.h"
#include "verilated.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

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

// -- bytes <-> Verilator port values (integral up to 64 bits, VlWide above) --------------------

template <typename T>
typename std::enable_if<std::is_integral<T>::value>::type put_bytes(T& port, const uint8_t* b,
                                                                   unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n && i < sizeof(T); ++i) v |= uint64_t(b[i]) << (8 * i);
    port = static_cast<T>(v);
}

template <std::size_t W>
void put_bytes(VlWide<W>& port, const uint8_t* b, unsigned n) {
    for (std::size_t w = 0; w < W; ++w) port[w] = 0;
    for (unsigned i = 0; i < n && i < 4 * W; ++i) port[i / 4] |= uint32_t(b[i]) << (8 * (i % 4));
}

template <typename T>
typename std::enable_if<std::is_integral<T>::value>::type get_bytes(const T& port, uint8_t* b,
                                                                   unsigned n) {
    const uint64_t v = static_cast<uint64_t>(port);
    for (unsigned i = 0; i < n; ++i) b[i] = i < sizeof(T) ? uint8_t(v >> (8 * i)) : 0;
}

template <std::size_t W>
void get_bytes(const VlWide<W>& port, uint8_t* b, unsigned n) {
    for (unsigned i = 0; i < n; ++i) b[i] = i < 4 * W ? uint8_t(port[i / 4] >> (8 * (i % 4))) : 0;
}

template <typename T>
typename std::enable_if<std::is_integral<T>::value, unsigned>::type port_bytes(const T&) {
    return sizeof(T);
}

template <std::size_t W>
unsigned port_bytes(const VlWide<W>&) { return 4 * W; }

template <typename T>
uint64_t as_u64(const T& port) { return static_cast<uint64_t>(port); }

// -- the MAC: frames in and out, one beat per cycle ----------------------------------------------

struct Mac {
    std::deque<std::pair<std::vector<uint8_t>, bool>> rx;  // frame, bad (tuser) flag
    std::size_t rx_pos = 0;                                 // bytes of rx.front() already sent
    std::vector<uint8_t> tx_frame;
    std::deque<std::vector<uint8_t>> tx;
    uint64_t rx_frames = 0, tx_frames = 0;
};

// Present the next rx beat and take tx (ready high) -- before the rising edge.  Returns what
// the edge will complete: bit 0 an rx beat, bit 1 a tx beat (whose bytes go to tx_frame now).
template <typename M>
auto mac_before_edge(M* top, Mac& mac, int) -> decltype(top->s_axis_rx_tvalid, top->m_axis_tx_tvalid, 0) {
    const unsigned width = port_bytes(top->s_axis_rx_tdata);
    if (!mac.rx.empty()) {
        const std::vector<uint8_t>& f = mac.rx.front().first;
        const unsigned n = unsigned(std::min<std::size_t>(width, f.size() - mac.rx_pos));
        put_bytes(top->s_axis_rx_tdata, f.data() + mac.rx_pos, n);
        uint8_t keep[64] = {0};
        for (unsigned i = 0; i < n; ++i) keep[i / 8] |= uint8_t(1u << (i % 8));
        put_bytes(top->s_axis_rx_tkeep, keep, (width + 7) / 8);
        top->s_axis_rx_tlast = mac.rx_pos + n >= f.size();
        top->s_axis_rx_tuser = mac.rx.front().second ? 1 : 0;
        top->s_axis_rx_tvalid = 1;
    } else {
        top->s_axis_rx_tvalid = 0;
        top->s_axis_rx_tlast = 0;
        top->s_axis_rx_tuser = 0;
    }
    top->m_axis_tx_tready = 1;
    top->eval();
    int done = 0;
    if (top->s_axis_rx_tvalid && top->s_axis_rx_tready) done |= 1;
    if (top->m_axis_tx_tvalid) {
        done |= 2;
        const unsigned tx_width = port_bytes(top->m_axis_tx_tdata);
        uint8_t data[128];
        uint8_t keep[16];
        get_bytes(top->m_axis_tx_tdata, data, tx_width);
        get_bytes(top->m_axis_tx_tkeep, keep, (tx_width + 7) / 8);
        for (unsigned i = 0; i < tx_width; ++i)
            if (keep[i / 8] >> (i % 8) & 1) mac.tx_frame.push_back(data[i]);
        if (top->m_axis_tx_tlast) done |= 4;
    }
    return done;
}

template <typename M>
int mac_before_edge(M*, Mac&, long) { return 0; }  // no Ethernet port

template <typename M>
auto mac_has_port(M* top, int) -> decltype(top->s_axis_rx_tvalid, top->m_axis_tx_tvalid, true) {
    return true;
}

template <typename M>
bool mac_has_port(M*, long) { return false; }

template <typename M>
auto mac_width(M* top, int) -> decltype(top->s_axis_rx_tvalid, 0u) { return port_bytes(top->s_axis_rx_tdata); }

template <typename M>
unsigned mac_width(M*, long) { return 0; }

struct Sim {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vtop> top;
    uint64_t cycles = 0;
    uint32_t timeout = 1000;
    Mac mac;

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
        const int beat = mac_before_edge(top.get(), mac, 0);
        top->clk = 1;
        ctx->timeInc(1);
        top->eval();
        top->clk = 0;
        ctx->timeInc(1);
        top->eval();
        ++cycles;
        if (beat & 1) {
            const std::size_t width = mac_width(top.get(), 0);
            const std::size_t size = mac.rx.front().first.size();
            mac.rx_pos += width;
            if (mac.rx_pos >= size) {
                mac.rx.pop_front();
                mac.rx_pos = 0;
                ++mac.rx_frames;
            }
        }
        if (beat & 4) {
            mac.tx.push_back(std::move(mac.tx_frame));
            mac.tx_frame.clear();
            ++mac.tx_frames;
        }
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

// -- Ethernet port ------------------------------------------------------------------------------

// bytes per beat of the MAC-side stream, 0 when the top has no Ethernet port
KVSIM_API int kvsim_eth_width(void* h) { return int(mac_width(static_cast<Sim*>(h)->top.get(), 0)); }

// Queue one frame (no FCS) for the rx port; bad = the MAC's tuser error flag on its beats.
KVSIM_API int kvsim_eth_send(void* h, const uint8_t* frame, uint32_t len, int bad) {
    Sim* s = static_cast<Sim*>(h);
    if (!mac_has_port(s->top.get(), 0) || len == 0) return KVSIM_BADARG;
    s->mac.rx.emplace_back(std::vector<uint8_t>(frame, frame + len), bad != 0);
    return KVSIM_OKAY;
}

// frames queued for rx and not yet fully taken by the design
KVSIM_API uint32_t kvsim_eth_rx_pending(void* h) { return uint32_t(static_cast<Sim*>(h)->mac.rx.size()); }

// Length of the oldest transmitted frame not yet read (0: none).
KVSIM_API uint32_t kvsim_eth_tx_peek(void* h) {
    Sim* s = static_cast<Sim*>(h);
    return s->mac.tx.empty() ? 0 : uint32_t(s->mac.tx.front().size());
}

// Copy the oldest transmitted frame into buf (cap bytes) and drop it; returns its length, 0 if
// there is none, KVSIM_BADARG (frame kept) if cap is too small.
KVSIM_API int kvsim_eth_recv(void* h, uint8_t* buf, uint32_t cap) {
    Sim* s = static_cast<Sim*>(h);
    if (s->mac.tx.empty()) return 0;
    const std::vector<uint8_t>& f = s->mac.tx.front();
    if (f.size() > cap) return KVSIM_BADARG;
    std::memcpy(buf, f.data(), f.size());
    const int n = int(f.size());
    s->mac.tx.pop_front();
    return n;
}

// Run until every queued rx frame is taken and `quiet` cycles pass with nothing transmitted,
// at most max_cycles; returns the cycles run.
KVSIM_API uint64_t kvsim_eth_run(void* h, uint32_t quiet, uint64_t max_cycles) {
    Sim* s = static_cast<Sim*>(h);
    uint64_t n = 0, still = 0, last_tx = s->mac.tx_frames, last_len = s->mac.tx_frame.size();
    while (n < max_cycles) {
        s->cycle();
        ++n;
        const bool moved = s->mac.tx_frames != last_tx || s->mac.tx_frame.size() != last_len;
        last_tx = s->mac.tx_frames;
        last_len = s->mac.tx_frame.size();
        still = (moved || !s->mac.rx.empty()) ? 0 : still + 1;
        if (still >= quiet) break;
    }
    return n;
}

// the harness ABI version, checked by pynq_kv/sim.py
KVSIM_API int kvsim_abi_version(void) { return 3; }
