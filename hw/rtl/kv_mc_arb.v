/*

pynq-kv: arbiter between the CSR mailbox and the memcached front-end in front
of the one engine pipeline

*/

// Language: Verilog 2001

`resetall
`timescale 1ns / 1ps
`default_nettype none

/*
 * Two requesters share kv_engine's request stream; responses are routed back
 * by one tag bit the arbiter adds above the requesters' tags (the engine runs
 * with TAG_W + 1 tag bits and answers in request order).
 *
 *   port A (s_axis_a_*, m_axis_a_*): the CSR mailbox
 *   port B (s_axis_b_*, m_axis_b_*): the front-end
 *
 * Arbitration, per accepted beat: A wins unless B is also waiting and the
 * previous beat accepted was A's; so when both keep requesting they
 * alternate, neither is ever starved, and a lone requester gets every cycle
 * (the front-end gets full rate whenever the mailbox is idle; the mailbox has
 * at most one command in flight, so in practice it costs the front-end one
 * slot per command).  The choice is held while the output beat waits for
 * tready, so m_axis_req_* is a well-formed AXI4-Stream.
 *
 * The request path is combinational (a mux); the response path routes tvalid
 * and tready by tag bit TAG_W.  A response for a requester that is not ready
 * waits at the engine's output (the engine's credit count then stops
 * admission), it never goes to the other port.
 */
module kv_mc_arb #
(
    // Request tdata width in bits (KV_REQ_W)
    parameter REQ_W = 714,
    // Response tdata width in bits (KV_RSP_W)
    parameter RSP_W = 726,
    // Tag width of each requester in bits: >= 1 (the engine side has TAG_W + 1)
    parameter TAG_W = 8
)
(
    input  wire                 clk,
    input  wire                 rst,

    /*
     * Port A (mailbox)
     */
    input  wire [REQ_W-1:0]     s_axis_a_req_tdata,
    input  wire [TAG_W-1:0]     s_axis_a_req_tuser,
    input  wire                 s_axis_a_req_tvalid,
    output wire                 s_axis_a_req_tready,
    output wire [RSP_W-1:0]     m_axis_a_rsp_tdata,
    output wire [TAG_W-1:0]     m_axis_a_rsp_tuser,
    output wire                 m_axis_a_rsp_tvalid,
    input  wire                 m_axis_a_rsp_tready,

    /*
     * Port B (front-end)
     */
    input  wire [REQ_W-1:0]     s_axis_b_req_tdata,
    input  wire [TAG_W-1:0]     s_axis_b_req_tuser,
    input  wire                 s_axis_b_req_tvalid,
    output wire                 s_axis_b_req_tready,
    output wire [RSP_W-1:0]     m_axis_b_rsp_tdata,
    output wire [TAG_W-1:0]     m_axis_b_rsp_tuser,
    output wire                 m_axis_b_rsp_tvalid,
    input  wire                 m_axis_b_rsp_tready,

    /*
     * Engine side
     */
    output wire [REQ_W-1:0]     m_axis_req_tdata,
    output wire [TAG_W:0]       m_axis_req_tuser,
    output wire                 m_axis_req_tvalid,
    input  wire                 m_axis_req_tready,
    input  wire [RSP_W-1:0]     s_axis_rsp_tdata,
    input  wire [TAG_W:0]       s_axis_rsp_tuser,
    input  wire                 s_axis_rsp_tvalid,
    output wire                 s_axis_rsp_tready
);

// check configuration
initial begin
    if (TAG_W < 1) begin
        $error("Error: TAG_W must be at least 1 (instance %m)");
        $finish;
    end
    if (REQ_W < 1 || RSP_W < 1) begin
        $error("Error: REQ_W and RSP_W must be at least 1 (instance %m)");
        $finish;
    end
end

reg last_a_reg;      // the last accepted beat was port A's
reg hold_reg;        // an output beat is waiting for tready
reg hold_b_reg;      // ... and it is port B's

wire pick_b = hold_reg ? hold_b_reg : (s_axis_b_req_tvalid && (!s_axis_a_req_tvalid || last_a_reg));

assign m_axis_req_tvalid = pick_b ? s_axis_b_req_tvalid : s_axis_a_req_tvalid;
assign m_axis_req_tdata = pick_b ? s_axis_b_req_tdata : s_axis_a_req_tdata;
assign m_axis_req_tuser = pick_b ? {1'b1, s_axis_b_req_tuser} : {1'b0, s_axis_a_req_tuser};
assign s_axis_a_req_tready = !pick_b && m_axis_req_tready;
assign s_axis_b_req_tready = pick_b && m_axis_req_tready;

always @(posedge clk) begin
    hold_reg <= m_axis_req_tvalid && !m_axis_req_tready;
    hold_b_reg <= pick_b;
    if (m_axis_req_tvalid && m_axis_req_tready) begin
        last_a_reg <= !pick_b;
    end
    if (rst) begin
        last_a_reg <= 1'b0;
        hold_reg <= 1'b0;
        hold_b_reg <= 1'b0;
    end
end

wire rsp_b = s_axis_rsp_tuser[TAG_W];

assign m_axis_a_rsp_tdata = s_axis_rsp_tdata;
assign m_axis_a_rsp_tuser = s_axis_rsp_tuser[TAG_W-1:0];
assign m_axis_a_rsp_tvalid = s_axis_rsp_tvalid && !rsp_b;
assign m_axis_b_rsp_tdata = s_axis_rsp_tdata;
assign m_axis_b_rsp_tuser = s_axis_rsp_tuser[TAG_W-1:0];
assign m_axis_b_rsp_tvalid = s_axis_rsp_tvalid && rsp_b;
assign s_axis_rsp_tready = rsp_b ? m_axis_b_rsp_tready : m_axis_a_rsp_tready;

endmodule

`resetall
