/*

pynq-kv: the appliance block: Ethernet front-end, memcached core, lookup
engine and AXI4-Lite CSR (what a Vivado design instantiates)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 *   MAC rx ─► kv_eth_if ─► kv_mc_core ─► kv_mc_arb ─► kv_engine
 *   MAC tx ◄─ kv_eth_if ◄─ kv_mc_core ◄─ kv_mc_arb ◄─┘   │ counters
 *   AXI4-Lite ─► kv_mc_csr ─► kv_csr (mailbox) ─► kv_mc_arb port A
 *                             └──────── kv_engine_top (FE_PORT = 1) ─────┘
 *
 * kv_eth_if (docs/frontend_rtl.md) checks and strips Ethernet/VLAN/IPv4/UDP,
 * answers ARP and ICMP echo, and builds the reply frames; kv_mc_core
 * (docs/frontend.md §3-§8) turns UDP payloads into engine requests and the
 * engine's answers into reply payloads.  kv_engine_top, the same block the
 * engine-only designs use, holds kv_csr, kv_mc_arb and kv_engine: the
 * arbiter shares the one engine pipeline between the front-end and the CSR
 * mailbox (the mailbox is never starved, the front-end has every cycle the
 * mailbox does not use).
 *
 * Register map (docs/registers.md): kv_mc_csr answers the front-end block
 * 0x900-0xBFF (MAC/IP/UDP port, the admission table, FE_COUNTER: the 21
 * frame counters of kv_eth_if then the 13 datagram/request counters of
 * kv_mc_core) and passes every other address to kv_csr (geometry, mailbox,
 * engine counters, and the change log of the SETs and DELs the wire made,
 * CL_* at 0xC00-0xE7F, for the host to drain).
 */
module kv_top #
(
    // Ethernet stream width in bits: 64 (10G/25G MAC) or 512 (100G CMAC)
    parameter DATA_W = 64,
    // Key width in bits (engine.md §1): 144, 288, 576 or 1152
    parameter KEY_W = 288,
    // Value width in bits: multiple of 32, 32 to 512
    parameter VALUE_W = 32,
    // Hash banks (ways), one RAM each: 2 to 8
    parameter WAYS = 4,
    // Rows per bank: power of two, 2 to 2^24
    parameter ROWS = 1024,
    // Stash entries: 0 to 64
    parameter STASH = 8,
    // Wildcard rule entries: 0 to 4096
    parameter RULES = 16,
    // Rule priority width in bits: 1 to 32
    parameter PRIO_W = 16,
    // 64-bit seed of the hash family (engine.md §3)
    parameter [63:0] HASH_SEED = 64'h70796E712D6B7631,
    // Width of the mailbox request tags: 1 to 31 (the engine gets one more bit)
    parameter TAG_W = 8,
    // AXI4-Lite address width: >= 12
    parameter ADDR_WIDTH = 12,
    // Hash pipeline stages (kv_h3_hash STAGES): 1 to 6
    parameter HASH_STAGES = 2,
    // Bank RAM read latency: 1, or 2 for the BRAM output register
    parameter RAM_LAT = 1,
    // Priority tree compare levels per pipeline stage: >= 1
    parameter TREE_LEVELS_PER_STAGE = 2,
    // Engine response FIFO depth (admission credit): > engine latency for full rate
    parameter RSP_FIFO_DEPTH = 16,
    // Reset values of the front-end address registers
    parameter [47:0] CFG_MAC = 48'h020000000001,
    parameter [31:0] CFG_IP = 32'h0A000001,
    parameter [15:0] CFG_UDP_PORT = 16'd11211,
    // kv_eth_if: longest frame without FCS, rx FIFO, rx descriptors, tx buffer,
    // longest reply payload, tx descriptors (docs/frontend_rtl.md)
    parameter MAX_FRAME = 1522,
    parameter RX_FIFO_BYTES = 16384,
    parameter RX_DESC_DEPTH = 64,
    parameter TX_BUF_BYTES = 8192,
    parameter TX_MAX_PAYLOAD = 1472,
    parameter TX_DESC_DEPTH = 32,
    // kv_mc_core: descriptor and metadata FIFOs, text line buffer, reply datagram size
    parameter DESC_DEPTH = 32,
    parameter META_DEPTH = 32,
    parameter LINE_BYTES = 2048,
    parameter MAX_DGRAM = 1400,
    // Admission table entries (frontend.md §10): 1 to 16
    parameter ADMIT_ENTRIES = 8,
    // Change log of the data plane's SETs and DELs (engine.md §10), records in block RAM:
    // 0 (none) or a power of two from 2 to 65536
    parameter CHANGELOG_DEPTH = 512
)
(
    input  wire                     clk,
    input  wire                     rst,

    /*
     * AXI4-Lite slave: registers, mailbox, counters
     */
    input  wire [ADDR_WIDTH-1:0]    s_axil_awaddr,
    input  wire [2:0]               s_axil_awprot,
    input  wire                     s_axil_awvalid,
    output wire                     s_axil_awready,
    input  wire [31:0]              s_axil_wdata,
    input  wire [3:0]               s_axil_wstrb,
    input  wire                     s_axil_wvalid,
    output wire                     s_axil_wready,
    output wire [1:0]               s_axil_bresp,
    output wire                     s_axil_bvalid,
    input  wire                     s_axil_bready,
    input  wire [ADDR_WIDTH-1:0]    s_axil_araddr,
    input  wire [2:0]               s_axil_arprot,
    input  wire                     s_axil_arvalid,
    output wire                     s_axil_arready,
    output wire [31:0]              s_axil_rdata,
    output wire [1:0]               s_axil_rresp,
    output wire                     s_axil_rvalid,
    input  wire                     s_axil_rready,

    /*
     * MAC receive (never back-pressured) and transmit, without FCS
     */
    input  wire [DATA_W-1:0]        s_axis_rx_tdata,
    input  wire [DATA_W/8-1:0]      s_axis_rx_tkeep,
    input  wire                     s_axis_rx_tvalid,
    output wire                     s_axis_rx_tready,
    input  wire                     s_axis_rx_tlast,
    input  wire                     s_axis_rx_tuser,
    output wire [DATA_W-1:0]        m_axis_tx_tdata,
    output wire [DATA_W/8-1:0]      m_axis_tx_tkeep,
    output wire                     m_axis_tx_tvalid,
    input  wire                     m_axis_tx_tready,
    output wire                     m_axis_tx_tlast,
    output wire                     m_axis_tx_tuser
);

localparam REQ_W = 106 + 2*KEY_W + VALUE_W;
localparam RSP_W = 118 + 2*KEY_W + VALUE_W;
localparam ETH_COUNTERS = 21;
localparam CORE_COUNTERS = 13;

// the submodules check their own parameters; this only adds what joins them
initial begin
    if (TAG_W < 1 || TAG_W > 31) begin
        $error("Error: TAG_W must be 1 to 31 (instance %m)");
        $finish;
    end
    if (ADDR_WIDTH < 12) begin
        $error("Error: ADDR_WIDTH must be at least 12 (instance %m)");
        $finish;
    end
end

/*
 * registers
 */
wire [ADDR_WIDTH-1:0] csr_awaddr, csr_araddr;
wire [2:0] csr_awprot, csr_arprot;
wire csr_awvalid, csr_awready, csr_wvalid, csr_wready, csr_bvalid, csr_bready;
wire csr_arvalid, csr_arready, csr_rvalid, csr_rready;
wire [31:0] csr_wdata, csr_rdata;
wire [3:0] csr_wstrb;
wire [1:0] csr_bresp, csr_rresp;
wire [47:0] cfg_mac;
wire [31:0] cfg_ip;
wire [15:0] cfg_udp_port;
wire counters_clear;
wire [ETH_COUNTERS*64-1:0] eth_counters;
wire [CORE_COUNTERS*64-1:0] core_counters;
wire [ADMIT_ENTRIES-1:0] admit_valid, admit_allow;
wire [32*ADMIT_ENTRIES-1:0] admit_addr, admit_mask;
wire [8*ADMIT_ENTRIES-1:0] admit_budget;
wire admit_def_allow;
wire [7:0] admit_def_budget;

kv_mc_csr #(
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .ADDR_WIDTH(ADDR_WIDTH),
    .DATA_W(DATA_W),
    .NUM_COUNTERS(ETH_COUNTERS + CORE_COUNTERS),
    .ADMIT_ENTRIES(ADMIT_ENTRIES),
    .CFG_MAC(CFG_MAC),
    .CFG_IP(CFG_IP),
    .CFG_UDP_PORT(CFG_UDP_PORT)
)
fe_csr_inst (
    .clk(clk),
    .rst(rst),
    .s_axil_awaddr(s_axil_awaddr),
    .s_axil_awprot(s_axil_awprot),
    .s_axil_awvalid(s_axil_awvalid),
    .s_axil_awready(s_axil_awready),
    .s_axil_wdata(s_axil_wdata),
    .s_axil_wstrb(s_axil_wstrb),
    .s_axil_wvalid(s_axil_wvalid),
    .s_axil_wready(s_axil_wready),
    .s_axil_bresp(s_axil_bresp),
    .s_axil_bvalid(s_axil_bvalid),
    .s_axil_bready(s_axil_bready),
    .s_axil_araddr(s_axil_araddr),
    .s_axil_arprot(s_axil_arprot),
    .s_axil_arvalid(s_axil_arvalid),
    .s_axil_arready(s_axil_arready),
    .s_axil_rdata(s_axil_rdata),
    .s_axil_rresp(s_axil_rresp),
    .s_axil_rvalid(s_axil_rvalid),
    .s_axil_rready(s_axil_rready),
    .m_axil_awaddr(csr_awaddr),
    .m_axil_awprot(csr_awprot),
    .m_axil_awvalid(csr_awvalid),
    .m_axil_awready(csr_awready),
    .m_axil_wdata(csr_wdata),
    .m_axil_wstrb(csr_wstrb),
    .m_axil_wvalid(csr_wvalid),
    .m_axil_wready(csr_wready),
    .m_axil_bresp(csr_bresp),
    .m_axil_bvalid(csr_bvalid),
    .m_axil_bready(csr_bready),
    .m_axil_araddr(csr_araddr),
    .m_axil_arprot(csr_arprot),
    .m_axil_arvalid(csr_arvalid),
    .m_axil_arready(csr_arready),
    .m_axil_rdata(csr_rdata),
    .m_axil_rresp(csr_rresp),
    .m_axil_rvalid(csr_rvalid),
    .m_axil_rready(csr_rready),
    .cfg_mac(cfg_mac),
    .cfg_ip(cfg_ip),
    .cfg_udp_port(cfg_udp_port),
    .counters_clear(counters_clear),
    .fe_counters({core_counters, eth_counters}),
    .cfg_admit_valid(admit_valid),
    .cfg_admit_allow(admit_allow),
    .cfg_admit_addr(admit_addr),
    .cfg_admit_mask(admit_mask),
    .cfg_admit_budget(admit_budget),
    .cfg_admit_def_allow(admit_def_allow),
    .cfg_admit_def_budget(admit_def_budget)
);

/*
 * the engine behind kv_csr, shared with the memcached core (kv_engine_top)
 */
wire [REQ_W-1:0] fe_req_tdata;
wire [TAG_W-1:0] fe_req_tuser;
wire fe_req_tvalid, fe_req_tready;
wire [RSP_W-1:0] fe_rsp_tdata;
wire [TAG_W-1:0] fe_rsp_tuser;
wire fe_rsp_tvalid, fe_rsp_tready;

kv_engine_top #(
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .WAYS(WAYS),
    .ROWS(ROWS),
    .STASH(STASH),
    .RULES(RULES),
    .PRIO_W(PRIO_W),
    .HASH_SEED(HASH_SEED),
    .TAG_W(TAG_W),
    .ADDR_WIDTH(ADDR_WIDTH),
    .HASH_STAGES(HASH_STAGES),
    .RAM_LAT(RAM_LAT),
    .TREE_LEVELS_PER_STAGE(TREE_LEVELS_PER_STAGE),
    .RSP_FIFO_DEPTH(RSP_FIFO_DEPTH),
    .FE_PORT(1),
    .CHANGELOG_DEPTH(CHANGELOG_DEPTH)
)
engine_top_inst (
    .clk(clk),
    .rst(rst),
    .s_axil_awaddr(csr_awaddr),
    .s_axil_awprot(csr_awprot),
    .s_axil_awvalid(csr_awvalid),
    .s_axil_awready(csr_awready),
    .s_axil_wdata(csr_wdata),
    .s_axil_wstrb(csr_wstrb),
    .s_axil_wvalid(csr_wvalid),
    .s_axil_wready(csr_wready),
    .s_axil_bresp(csr_bresp),
    .s_axil_bvalid(csr_bvalid),
    .s_axil_bready(csr_bready),
    .s_axil_araddr(csr_araddr),
    .s_axil_arprot(csr_arprot),
    .s_axil_arvalid(csr_arvalid),
    .s_axil_arready(csr_arready),
    .s_axil_rdata(csr_rdata),
    .s_axil_rresp(csr_rresp),
    .s_axil_rvalid(csr_rvalid),
    .s_axil_rready(csr_rready),
    .s_axis_fe_req_tdata(fe_req_tdata),
    .s_axis_fe_req_tuser(fe_req_tuser),
    .s_axis_fe_req_tvalid(fe_req_tvalid),
    .s_axis_fe_req_tready(fe_req_tready),
    .m_axis_fe_rsp_tdata(fe_rsp_tdata),
    .m_axis_fe_rsp_tuser(fe_rsp_tuser),
    .m_axis_fe_rsp_tvalid(fe_rsp_tvalid),
    .m_axis_fe_rsp_tready(fe_rsp_tready)
);

/*
 * Ethernet L2-L4
 */
wire [DATA_W-1:0] pl_tdata, rpl_tdata;
wire [DATA_W/8-1:0] pl_tkeep, rpl_tkeep;
wire pl_tvalid, pl_tready, pl_tlast, rpl_tvalid, rpl_tready, rpl_tlast;
wire [128:0] pl_meta, rpl_meta;

kv_eth_if #(
    .DATA_W(DATA_W),
    .MAX_FRAME(MAX_FRAME),
    .RX_FIFO_BYTES(RX_FIFO_BYTES),
    .RX_DESC_DEPTH(RX_DESC_DEPTH),
    .TX_BUF_BYTES(TX_BUF_BYTES),
    .TX_MAX_PAYLOAD(TX_MAX_PAYLOAD),
    .TX_DESC_DEPTH(TX_DESC_DEPTH),
    .NUM_COUNTERS(ETH_COUNTERS)
)
eth_inst (
    .clk(clk),
    .rst(rst),
    .cfg_mac(cfg_mac),
    .cfg_ip(cfg_ip),
    .cfg_udp_port(cfg_udp_port),
    .s_axis_rx_tdata(s_axis_rx_tdata),
    .s_axis_rx_tkeep(s_axis_rx_tkeep),
    .s_axis_rx_tvalid(s_axis_rx_tvalid),
    .s_axis_rx_tready(s_axis_rx_tready),
    .s_axis_rx_tlast(s_axis_rx_tlast),
    .s_axis_rx_tuser(s_axis_rx_tuser),
    .m_axis_tx_tdata(m_axis_tx_tdata),
    .m_axis_tx_tkeep(m_axis_tx_tkeep),
    .m_axis_tx_tvalid(m_axis_tx_tvalid),
    .m_axis_tx_tready(m_axis_tx_tready),
    .m_axis_tx_tlast(m_axis_tx_tlast),
    .m_axis_tx_tuser(m_axis_tx_tuser),
    .m_axis_pl_tdata(pl_tdata),
    .m_axis_pl_tkeep(pl_tkeep),
    .m_axis_pl_tvalid(pl_tvalid),
    .m_axis_pl_tready(pl_tready),
    .m_axis_pl_tlast(pl_tlast),
    .m_axis_pl_meta(pl_meta),
    .s_axis_rpl_tdata(rpl_tdata),
    .s_axis_rpl_tkeep(rpl_tkeep),
    .s_axis_rpl_tvalid(rpl_tvalid),
    .s_axis_rpl_tready(rpl_tready),
    .s_axis_rpl_tlast(rpl_tlast),
    .s_axis_rpl_meta(rpl_meta),
    .counters_clear(counters_clear),
    .counters(eth_counters)
);

/*
 * memcached core
 */
kv_mc_core #(
    .DATA_W(DATA_W),
    .KEY_W(KEY_W),
    .VALUE_W(VALUE_W),
    .TAG_W(TAG_W),
    .DESC_DEPTH(DESC_DEPTH),
    .META_DEPTH(META_DEPTH),
    .LINE_BYTES(LINE_BYTES),
    .MAX_DGRAM(MAX_DGRAM),
    .ADMIT_ENTRIES(ADMIT_ENTRIES)
)
core_inst (
    .clk(clk),
    .rst(rst),
    .s_axis_pl_tdata(pl_tdata),
    .s_axis_pl_tkeep(pl_tkeep),
    .s_axis_pl_tvalid(pl_tvalid),
    .s_axis_pl_tready(pl_tready),
    .s_axis_pl_tlast(pl_tlast),
    .s_axis_pl_meta(pl_meta),
    .m_axis_rpl_tdata(rpl_tdata),
    .m_axis_rpl_tkeep(rpl_tkeep),
    .m_axis_rpl_tvalid(rpl_tvalid),
    .m_axis_rpl_tready(rpl_tready),
    .m_axis_rpl_tlast(rpl_tlast),
    .m_axis_rpl_meta(rpl_meta),
    .m_axis_req_tdata(fe_req_tdata),
    .m_axis_req_tuser(fe_req_tuser),
    .m_axis_req_tvalid(fe_req_tvalid),
    .m_axis_req_tready(fe_req_tready),
    .s_axis_rsp_tdata(fe_rsp_tdata),
    .s_axis_rsp_tuser(fe_rsp_tuser),
    .s_axis_rsp_tvalid(fe_rsp_tvalid),
    .s_axis_rsp_tready(fe_rsp_tready),
    .cfg_admit_valid(admit_valid),
    .cfg_admit_allow(admit_allow),
    .cfg_admit_addr(admit_addr),
    .cfg_admit_mask(admit_mask),
    .cfg_admit_budget(admit_budget),
    .cfg_admit_def_allow(admit_def_allow),
    .cfg_admit_def_budget(admit_def_budget),
    .counters_clear(counters_clear),
    .counters(core_counters)
);

endmodule

`resetall
