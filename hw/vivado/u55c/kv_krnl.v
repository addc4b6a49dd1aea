/*

pynq-kv: kv_top as a Vitis RTL kernel (user-managed) for the Alveo U55C

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Only what Vitis asks of a kernel's ports (UG1393/UG1700, RTL kernel interface requirements):
 * the AXI4-Lite interface packaged as s_axi_control, the platform's active-low reset
 * ap_rst_n (pipelined here, as the guide recommends) and the kernel clock ap_clk. The AXI4-Lite,
 * receive and transmit streams pass straight through to kv_top.
 *
 * The parameters are kv_top's, with the same defaults (tests/test_vivado.py compares them with
 * Yosys); the board's values come from package_ip.tcl (overlays/u55c/manifest.json).
 */
module kv_krnl #
(
    // Ethernet stream width in bits: 512 on the CMAC (100G)
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
    // Width of the mailbox request tags: 1 to 31
    parameter TAG_W = 8,
    // AXI4-Lite address width: >= 12
    parameter ADDR_WIDTH = 12,
    // Hash pipeline stages: 1 to 6
    parameter HASH_STAGES = 2,
    // Bank RAM read latency: 1 or 2
    parameter RAM_LAT = 1,
    // Priority tree compare levels per pipeline stage: >= 1
    parameter TREE_LEVELS_PER_STAGE = 2,
    // Engine response FIFO depth
    parameter RSP_FIFO_DEPTH = 16,
    // Reset values of the front-end address registers
    parameter [47:0] CFG_MAC = 48'h020000000001,
    parameter [31:0] CFG_IP = 32'h0A000001,
    parameter [15:0] CFG_UDP_PORT = 16'd11211,
    // kv_eth_if buffers and limits (docs/frontend_rtl.md)
    parameter MAX_FRAME = 1522,
    parameter RX_FIFO_BYTES = 16384,
    parameter RX_DESC_DEPTH = 64,
    parameter TX_BUF_BYTES = 8192,
    parameter TX_MAX_PAYLOAD = 1472,
    parameter TX_DESC_DEPTH = 32,
    // kv_mc_core FIFOs and sizes
    parameter DESC_DEPTH = 32,
    parameter META_DEPTH = 32,
    parameter LINE_BYTES = 2048,
    parameter MAX_DGRAM = 1400,
    // Entries of the front-end's admission table (frontend.md §10): 1 to 16
    parameter ADMIT_ENTRIES = 8,
    // Change log of the data plane's SETs and DELs (engine.md §10), records in block RAM:
    // 0 (none) or a power of two from 2 to 65536
    parameter CHANGELOG_DEPTH = 512
)
(
    input  wire                     ap_clk,
    input  wire                     ap_rst_n,

    /*
     * AXI4-Lite slave (Vitis: s_axi_control)
     */
    input  wire [ADDR_WIDTH-1:0]    s_axi_control_awaddr,
    input  wire [2:0]               s_axi_control_awprot,
    input  wire                     s_axi_control_awvalid,
    output wire                     s_axi_control_awready,
    input  wire [31:0]              s_axi_control_wdata,
    input  wire [3:0]               s_axi_control_wstrb,
    input  wire                     s_axi_control_wvalid,
    output wire                     s_axi_control_wready,
    output wire [1:0]               s_axi_control_bresp,
    output wire                     s_axi_control_bvalid,
    input  wire                     s_axi_control_bready,
    input  wire [ADDR_WIDTH-1:0]    s_axi_control_araddr,
    input  wire [2:0]               s_axi_control_arprot,
    input  wire                     s_axi_control_arvalid,
    output wire                     s_axi_control_arready,
    output wire [31:0]              s_axi_control_rdata,
    output wire [1:0]               s_axi_control_rresp,
    output wire                     s_axi_control_rvalid,
    input  wire                     s_axi_control_rready,

    /*
     * CMAC receive and transmit
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

// kv_top checks every parameter itself; this wrapper adds none of its own
initial begin
    if (DATA_W != 64 && DATA_W != 512) begin
        $error("Error: DATA_W must be 64 or 512 (instance %m)");
        $finish;
    end
end

// active-low platform reset -> two register stages -> active-high kv_top reset (the
// platform holds ap_rst_n low after configuration, which fills the pipe)
reg [1:0] rst_pipe;

always @(posedge ap_clk) begin
    rst_pipe <= {rst_pipe[0], !ap_rst_n};
end

kv_top #(
    .DATA_W(DATA_W),
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
    .CFG_MAC(CFG_MAC),
    .CFG_IP(CFG_IP),
    .CFG_UDP_PORT(CFG_UDP_PORT),
    .MAX_FRAME(MAX_FRAME),
    .RX_FIFO_BYTES(RX_FIFO_BYTES),
    .RX_DESC_DEPTH(RX_DESC_DEPTH),
    .TX_BUF_BYTES(TX_BUF_BYTES),
    .TX_MAX_PAYLOAD(TX_MAX_PAYLOAD),
    .TX_DESC_DEPTH(TX_DESC_DEPTH),
    .DESC_DEPTH(DESC_DEPTH),
    .META_DEPTH(META_DEPTH),
    .LINE_BYTES(LINE_BYTES),
    .MAX_DGRAM(MAX_DGRAM),
    .ADMIT_ENTRIES(ADMIT_ENTRIES),
    .CHANGELOG_DEPTH(CHANGELOG_DEPTH)
)
kv_top_inst (
    .clk(ap_clk),
    .rst(rst_pipe[1]),
    .s_axil_awaddr(s_axi_control_awaddr),
    .s_axil_awprot(s_axi_control_awprot),
    .s_axil_awvalid(s_axi_control_awvalid),
    .s_axil_awready(s_axi_control_awready),
    .s_axil_wdata(s_axi_control_wdata),
    .s_axil_wstrb(s_axi_control_wstrb),
    .s_axil_wvalid(s_axi_control_wvalid),
    .s_axil_wready(s_axi_control_wready),
    .s_axil_bresp(s_axi_control_bresp),
    .s_axil_bvalid(s_axi_control_bvalid),
    .s_axil_bready(s_axi_control_bready),
    .s_axil_araddr(s_axi_control_araddr),
    .s_axil_arprot(s_axi_control_arprot),
    .s_axil_arvalid(s_axi_control_arvalid),
    .s_axil_arready(s_axi_control_arready),
    .s_axil_rdata(s_axi_control_rdata),
    .s_axil_rresp(s_axi_control_rresp),
    .s_axil_rvalid(s_axi_control_rvalid),
    .s_axil_rready(s_axi_control_rready),
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
    .m_axis_tx_tuser(m_axis_tx_tuser)
);

endmodule

`resetall
