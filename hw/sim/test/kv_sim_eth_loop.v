/*

pynq-kv: Ethernet-port test top for the Verilator harness (hw/sim/kv_sim.cpp)

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * The register file of kv_sim_regfile plus a MAC-side stream pair, for
 * tests/test_sim.py: every frame received on s_axis_rx comes back on
 * m_axis_tx with its first byte replaced by the number of frames accepted
 * before it (mod 256), unless the MAC flagged it bad (tuser on any beat: the
 * frame is dropped).  Frames are stored and forwarded, and the receive side
 * is stalled (tready low) every STALL_EVERY-th cycle, so the harness sees
 * back-pressure and a transmit burst that lags the receive.
 */
module kv_sim_eth_loop #
(
    // stream width in bits: 64 or 512
    parameter DATA_W = 64,
    // tready low one cycle in every STALL_EVERY (0: never): 0 or 2 to 255
    parameter STALL_EVERY = 3,
    // beats the frame buffer holds (longest frame = DEPTH beats): 4 to 1024
    parameter DEPTH = 256
)
(
    input  wire                   clk,
    input  wire                   rst,

    input  wire [11:0]            s_axil_awaddr,
    input  wire [2:0]             s_axil_awprot,
    input  wire                   s_axil_awvalid,
    output wire                   s_axil_awready,
    input  wire [31:0]            s_axil_wdata,
    input  wire [3:0]             s_axil_wstrb,
    input  wire                   s_axil_wvalid,
    output wire                   s_axil_wready,
    output wire [1:0]             s_axil_bresp,
    output wire                   s_axil_bvalid,
    input  wire                   s_axil_bready,
    input  wire [11:0]            s_axil_araddr,
    input  wire [2:0]             s_axil_arprot,
    input  wire                   s_axil_arvalid,
    output wire                   s_axil_arready,
    output wire [31:0]            s_axil_rdata,
    output wire [1:0]             s_axil_rresp,
    output wire                   s_axil_rvalid,
    input  wire                   s_axil_rready,

    input  wire [DATA_W-1:0]      s_axis_rx_tdata,
    input  wire [DATA_W/8-1:0]    s_axis_rx_tkeep,
    input  wire                   s_axis_rx_tvalid,
    output wire                   s_axis_rx_tready,
    input  wire                   s_axis_rx_tlast,
    input  wire                   s_axis_rx_tuser,

    output wire [DATA_W-1:0]      m_axis_tx_tdata,
    output wire [DATA_W/8-1:0]    m_axis_tx_tkeep,
    output wire                   m_axis_tx_tvalid,
    input  wire                   m_axis_tx_tready,
    output wire                   m_axis_tx_tlast
);

localparam KEEP_W = DATA_W / 8;
localparam PTR_W = $clog2(DEPTH);

initial begin
    if (DATA_W != 64 && DATA_W != 512) begin
        $error("Error: DATA_W must be 64 or 512 (instance %m)");
        $finish;
    end
    if (STALL_EVERY == 1 || STALL_EVERY > 255) begin
        $error("Error: STALL_EVERY must be 0 or 2 to 255 (instance %m)");
        $finish;
    end
    if (DEPTH < 4 || DEPTH > 1024 || (DEPTH & (DEPTH - 1)) != 0) begin
        $error("Error: DEPTH must be a power of two from 4 to 1024 (instance %m)");
        $finish;
    end
end

kv_sim_regfile regs (
    .clk(clk), .rst(rst),
    .s_axil_awaddr(s_axil_awaddr), .s_axil_awprot(s_axil_awprot),
    .s_axil_awvalid(s_axil_awvalid), .s_axil_awready(s_axil_awready),
    .s_axil_wdata(s_axil_wdata), .s_axil_wstrb(s_axil_wstrb),
    .s_axil_wvalid(s_axil_wvalid), .s_axil_wready(s_axil_wready),
    .s_axil_bresp(s_axil_bresp), .s_axil_bvalid(s_axil_bvalid), .s_axil_bready(s_axil_bready),
    .s_axil_araddr(s_axil_araddr), .s_axil_arprot(s_axil_arprot),
    .s_axil_arvalid(s_axil_arvalid), .s_axil_arready(s_axil_arready),
    .s_axil_rdata(s_axil_rdata), .s_axil_rresp(s_axil_rresp),
    .s_axil_rvalid(s_axil_rvalid), .s_axil_rready(s_axil_rready)
);

// one frame at a time: receive it whole, then send it
reg [DATA_W-1:0] data_mem [0:DEPTH-1];
reg [KEEP_W-1:0] keep_mem [0:DEPTH-1];
reg [PTR_W:0]    wr_ptr = 0, rd_ptr = 0, last_ptr = 0;
reg              sending = 1'b0, bad = 1'b0;
reg [7:0]        count = 8'd0, stall = 8'd0;

wire stalled = STALL_EVERY != 0 && stall == STALL_EVERY - 1;
assign s_axis_rx_tready = !sending && !stalled;
wire rx_beat = s_axis_rx_tvalid && s_axis_rx_tready;
wire first = rd_ptr == 0;

assign m_axis_tx_tdata = first ? {data_mem[rd_ptr[PTR_W-1:0]][DATA_W-1:8], count - 8'd1}
                               : data_mem[rd_ptr[PTR_W-1:0]];
assign m_axis_tx_tkeep = keep_mem[rd_ptr[PTR_W-1:0]];
assign m_axis_tx_tvalid = sending;
assign m_axis_tx_tlast = rd_ptr == last_ptr;

always @(posedge clk) begin
    stall <= stalled ? 8'd0 : stall + 8'd1;
    if (rx_beat) begin
        if (wr_ptr < DEPTH) begin
            data_mem[wr_ptr[PTR_W-1:0]] <= s_axis_rx_tdata;
            keep_mem[wr_ptr[PTR_W-1:0]] <= s_axis_rx_tkeep;
        end
        if (s_axis_rx_tlast) begin
            if (bad || s_axis_rx_tuser || wr_ptr >= DEPTH) begin
                wr_ptr <= 0;  // dropped
            end else begin
                last_ptr <= wr_ptr;
                rd_ptr <= 0;
                sending <= 1'b1;
                count <= count + 8'd1;
            end
            bad <= 1'b0;
        end else begin
            wr_ptr <= wr_ptr + 1'b1;
            bad <= bad || s_axis_rx_tuser;
        end
    end
    if (sending && m_axis_tx_tready) begin
        if (rd_ptr == last_ptr) begin
            sending <= 1'b0;
            wr_ptr <= 0;
        end else begin
            rd_ptr <= rd_ptr + 1'b1;
        end
    end
    if (rst) begin
        wr_ptr <= 0;
        rd_ptr <= 0;
        sending <= 1'b0;
        bad <= 1'b0;
        count <= 8'd0;
        stall <= 8'd0;
    end
end

endmodule

`resetall
